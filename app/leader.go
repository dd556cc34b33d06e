package app

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/sharding"

	"github.com/mini-kcm/mini-kcm/options"
)

// newLeaderCommand returns `mini-kcm leader`, which shows the state of the election.
func newLeaderCommand() *cobra.Command {
	generic := options.NewGenericOptions()
	le := options.NewLeaderElectionOptions()
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Print who holds the mini-kcm Lease and which candidates were seen",
		Long: `Print the mini-kcm Lease: its holder, when it was acquired and last renewed, its
duration and how often it changed hands, followed by the candidates seen in the
LeaderElection events recorded on the Lease (events expire, by default after one hour).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// cobra gives every subcommand the process-wide pflag flags, verflag's
			// --version among them: honour it rather than ignore it.
			if printVersionIfRequested(cmd.OutOrStdout(), cmd.Flags()) {
				return nil
			}
			cfg, err := generic.RESTConfig()
			if err != nil {
				return err
			}
			cfg.UserAgent = userAgent("leader")
			cfg.Timeout = 10 * time.Second
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("building the Kubernetes client: %w", err)
			}
			return printLeader(cmd.Context(), cmd.OutOrStdout(), client, le.ResourceNamespace, le.ResourceName, time.Now())
		},
	}
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("generic")
	generic.AddConnectionFlags(fs)
	le.AddLeaseFlags(fss.FlagSet("leader election"))
	fss.FlagSet("misc").BoolP("help", "h", false, "help for leader")
	for _, name := range fss.Order {
		cmd.Flags().AddFlagSet(fss.FlagSets[name])
	}
	cliflag.SetUsageAndHelpFunc(cmd, fss, terminalWidth(cmd.OutOrStdout()))
	return cmd
}

// released is printed as the holder of a Lease nobody holds.
const released = "<none> (released)"

// printShards writes, in sharded mode (--shards above 1), the plan and each shard's
// holder; without shard Leases it writes nothing. The main Lease's holder is then the
// coordinator, which cuts the namespaces but works on none. Read once, a Lease expires
// by its renewTime (sharding.ExpiredByRenewTime).
func printShards(ctx context.Context, w io.Writer, client kubernetes.Interface, namespace, name string, now time.Time) error {
	list, err := client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(map[string]string{sharding.LabelSet: name}).String(),
	})
	if err != nil || len(list.Items) == 0 {
		return err
	}
	leases := make([]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		leases[i] = &list.Items[i]
	}
	expired := func(l *coordinationv1.Lease) bool { return sharding.ExpiredByRenewTime(l, now) }
	set, err := sharding.ReadLeaseSet(name, leases, expired)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nSharded: the holder above coordinates; %d live replicas: %s\n", len(set.Live), strings.Join(set.Live, ", "))
	active, next := set.Active, set.Next
	if active == nil {
		fmt.Fprintln(w, "Plan: none yet (the coordinator writes the first one)")
		return nil
	}
	fmt.Fprintf(w, "Plan: epoch %d, %d shards", active.Number, active.Plan.Shards())
	if next != nil {
		fmt.Fprintf(w, "; handing shards %v over to epoch %d (%d shards)", active.Moved(*next), next.Number, next.Plan.Shards())
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SHARD\tNAMESPACE HASHES\tHOLDER\tRENEWED")
	for i := range active.Plan.Shards() {
		l, ok := set.Shards[i]
		holder := "<no Lease yet>"
		renewed := ""
		if ok {
			holder = ptr.Deref(l.Spec.HolderIdentity, "")
			switch {
			case l.Labels[sharding.LabelEpoch] != active.Label(i):
				holder = "<being handed over>"
			case holder == "":
				holder = released
			case expired(l):
				holder += " (expired)"
			}
			if l.Spec.RenewTime != nil {
				renewed = duration.HumanDuration(now.Sub(l.Spec.RenewTime.Time)) + " ago"
			}
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", i, active.Range(i), holder, renewed)
	}
	return tw.Flush()
}

// candidate summarises the LeaderElection events of one identity.
type candidate struct {
	identity string
	// last is the latest event's action, "became leader" or "stopped leading".
	last     string
	lastSeen time.Time
	// terms counts how often the candidate became leader.
	terms int32
}

// printLeader writes the Lease and the candidates seen in its events to w.
func printLeader(ctx context.Context, w io.Writer, client kubernetes.Interface, namespace, name string, now time.Time) error {
	lease, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s/%s not found: no mini-kcm with --leader-elect has run against this cluster yet, "+
			"or it uses another --leader-elect-resource-name or --leader-elect-resource-namespace", namespace, name)
	}
	if err != nil {
		return fmt.Errorf("reading lease %s/%s: %w", namespace, name, err)
	}

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	spec := lease.Spec
	holder := released
	if spec.HolderIdentity != nil && *spec.HolderIdentity != "" {
		holder = *spec.HolderIdentity
	}
	fmt.Fprintf(tw, "Lease:\t%s/%s\n", namespace, name)
	fmt.Fprintf(tw, "Holder:\t%s\n", holder)
	fmt.Fprintf(tw, "Acquired:\t%s\n", microTime(spec.AcquireTime, now))
	fmt.Fprintf(tw, "Renewed:\t%s\n", microTime(spec.RenewTime, now))
	if spec.LeaseDurationSeconds != nil {
		d := time.Duration(*spec.LeaseDurationSeconds) * time.Second
		state := "valid by this machine's clock"
		switch {
		case holder == released:
			state = "released"
		case sharding.ExpiredByRenewTime(lease, now):
			state = "expired by this machine's clock"
		case spec.RenewTime == nil:
			state = "never renewed: a standby takes it a lease duration after it first reads it"
		}
		fmt.Fprintf(tw, "Lease duration:\t%s (%s)\n", d, state)
	}
	if spec.LeaseTransitions != nil {
		fmt.Fprintf(tw, "Transitions:\t%d\n", *spec.LeaseTransitions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printShards(ctx, w, client, namespace, name, now); err != nil {
		fmt.Fprintf(w, "\nShards: unknown, listing their Leases failed: %v\n", err)
	}

	selector := fields.Set{
		"involvedObject.kind": "Lease",
		"involvedObject.name": name,
		"reason":              "LeaderElection",
	}.AsSelector().String()
	list, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		fmt.Fprintf(w, "\nCandidates: unknown, listing events failed: %v\n", err)
		return nil
	}
	candidates := candidatesFrom(list.Items)
	if len(candidates) == 0 {
		fmt.Fprintln(w, "\nCandidates: none seen (no LeaderElection events; they expire after an hour by default)")
		return nil
	}
	fmt.Fprintln(w, "\nCandidates seen (newest first):")
	fmt.Fprintln(tw, "  IDENTITY\tLAST EVENT\tWHEN\tTIMES LEADER")
	for _, c := range candidates {
		fmt.Fprintf(tw, "  %s\t%s\t%s ago\t%d\n", c.identity, c.last, duration.HumanDuration(now.Sub(c.lastSeen)), c.terms)
	}
	return tw.Flush()
}

// candidatesFrom parses "<identity> became leader" and "<identity> stopped leading"
// events, newest candidate first.
func candidatesFrom(events []corev1.Event) []candidate {
	byIdentity := map[string]*candidate{}
	for _, e := range events {
		var identity, action string
		for _, a := range []string{"became leader", "stopped leading"} {
			if id, ok := strings.CutSuffix(e.Message, " "+a); ok {
				identity, action = id, a
			}
		}
		if identity == "" {
			continue
		}
		seen := eventTime(e)
		c, ok := byIdentity[identity]
		if !ok {
			c = &candidate{identity: identity}
			byIdentity[identity] = c
		}
		if action == "became leader" {
			c.terms += max(e.Count, 1)
		}
		if seen.After(c.lastSeen) || c.last == "" {
			c.last, c.lastSeen = action, seen
		}
	}
	out := make([]candidate, 0, len(byIdentity))
	for _, c := range byIdentity {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].lastSeen.Equal(out[j].lastSeen) {
			return out[i].lastSeen.After(out[j].lastSeen)
		}
		return out[i].identity < out[j].identity
	})
	return out
}

// eventTime is when an event last happened, whichever API version wrote it.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

func microTime(t *metav1.MicroTime, now time.Time) string {
	if t == nil || t.IsZero() {
		return "<unset>"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(t.Time)))
}
