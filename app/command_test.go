package app

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes/fake"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/replicaset"
	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/sharding"
)

func testRegistry(t *testing.T) *controllers.Registry {
	t.Helper()
	noop := func(context.Context, controllers.Context) (controllers.Controller, int, error) { return nil, 0, nil }
	reg, err := controllers.NewRegistry(
		controllers.Descriptor{Name: "replicaset-controller", Aliases: []string{"replicaset"}, New: noop, NewOptions: replicaset.NewOptions},
		controllers.Descriptor{Name: "tokencleaner-controller", DisabledByDefault: true, New: noop},
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// execute runs the command with args and returns its output and error.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCommand(testRegistry(t))
	// --version's value is verflag's process-wide global: put it back for the next test.
	t.Cleanup(func() {
		if err := cmd.Flags().Set("version", "false"); err != nil {
			t.Error(err)
		}
	})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestPositionalArgumentsAreRejected(t *testing.T) {
	for _, args := range [][]string{{"foo"}, {"--leader-elect=false", "true"}, {"leader", "extra"}} {
		_, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), "does not take any arguments, got") {
			t.Errorf("%q: error = %v, want kube-controller-manager's positional argument error", args, err)
		}
	}
}

// The command validates logging against its own feature gate: before --feature-gates
// existed, no flag could enable an alpha logging option that --help advertises.
func TestFeatureGatesEnableTheAlphaLoggingFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := execute(t, "--log-text-split-stream", "--kubeconfig", missing)
	if err == nil || !strings.Contains(err.Error(), "Feature LoggingAlphaOptions is disabled") {
		t.Errorf("without the gate: %v, want the LoggingAlphaOptions error", err)
	}

	// Past validation the command applies the logging configuration to the process;
	// put the default back for the other tests.
	t.Cleanup(func() {
		if err := logsapi.ResetForTest(nil); err != nil {
			t.Error(err)
		}
	})
	out, err := execute(t, "--log-text-split-stream", "--feature-gates=LoggingAlphaOptions=true", "--kubeconfig", missing)
	// The run gets past logging and stops at the next problem, the kubeconfig.
	if err == nil || !strings.Contains(out, "does not exist") {
		t.Errorf("with the gate: %v\n%s\nwant the missing kubeconfig reported", err, out)
	}
}

func TestHelpShowsSectionsAndTheKnownControllers(t *testing.T) {
	out, err := execute(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Generic flags:", "Leader election flags:", "Secure serving flags:", "Authentication flags:", "Authorization flags:", "Replicaset-controller flags:",
		"Debugging flags:", "Logs flags:", "Misc flags:",
		"All controllers: replicaset-controller, tokencleaner-controller",
		"\n\nControllers: replicaset-controller, tokencleaner-controller.\n",
		"Disabled-by-default controllers: tokencleaner-controller",
		"mini-kcm leader",
		"Supported kube-apiserver versions: " + options.SupportedAPIServers(),
		"--allow-credentials-in-logs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not show %q", want)
		}
	}
}

func TestLeaderPrintsHolderTimesAndCandidates(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	acquired := metav1.NewMicroTime(now.Add(-5 * time.Minute))
	renewed := metav1.NewMicroTime(now.Add(-2 * time.Second))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "mini-kube-controller-manager"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("node-b_2"),
			LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime:          &acquired,
			RenewTime:            &renewed,
			LeaseTransitions:     ptr.To[int32](3),
		},
	}
	event := func(name, message string, ago time.Duration) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "kube-system", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Lease", Name: "mini-kube-controller-manager", Namespace: "kube-system"},
			Reason:         "LeaderElection",
			Message:        message,
			Count:          1,
			LastTimestamp:  metav1.NewTime(now.Add(-ago)),
		}
	}
	client := fake.NewClientset(lease,
		event("e1", "node-a_1 became leader", 10*time.Minute),
		event("e2", "node-a_1 stopped leading", 5*time.Minute),
		event("e3", "node-b_2 became leader", 5*time.Minute-time.Second),
	)
	var out bytes.Buffer
	if err := printLeader(context.Background(), &out, client, "kube-system", "mini-kube-controller-manager", now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Lease:           kube-system/mini-kube-controller-manager",
		"Holder:          node-b_2",
		"Acquired:        2026-01-02T02:59:05Z (5m ago)",
		"Renewed:         2026-01-02T03:04:03Z (2s ago)",
		"Lease duration:  15s (valid by this machine's clock)",
		"Transitions:     3",
		"node-b_2  became leader    4m59s ago  1",
		"node-a_1  stopped leading  5m ago     1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not contain %q:\n%s", want, out.String())
		}
	}
	if strings.Index(out.String(), "node-b_2  became") > strings.Index(out.String(), "node-a_1  stopped") {
		t.Errorf("candidates are not newest first:\n%s", out.String())
	}
}

func TestLeaderExplainsAMissingLease(t *testing.T) {
	err := printLeader(context.Background(), &bytes.Buffer{}, fake.NewClientset(), "kube-system", "x", time.Now())
	if err == nil || !strings.Contains(err.Error(), "lease kube-system/x not found") {
		t.Errorf("printLeader() = %v", err)
	}
}

func TestInvalidConfigurationIsListedOneProblemPerLine(t *testing.T) {
	var out bytes.Buffer
	err := reportInvalid(&out, utilerrors.NewAggregate([]error{
		errors.New(`--leader-elect-resource-lock must be "leases", got "endpoints"`),
		errors.New("--secure-port -1 must be between 0 and 65535"),
	}))
	want := "Error: invalid configuration:\n" +
		"  - --leader-elect-resource-lock must be \"leases\", got \"endpoints\"\n" +
		"  - --secure-port -1 must be between 0 and 65535\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	if err == nil || err.Error() != "invalid configuration: 2 problem(s), listed above" {
		t.Errorf("returned %v", err)
	}
}

// `mini-kcm leader` takes its flags from options: each one is the main command's flag,
// with the same help and default, so the two can never drift apart.
func TestLeaderFlagsAreTheMainCommandsFlags(t *testing.T) {
	root := newCommand(testRegistry(t))
	leader, _, err := root.Find([]string{"leader"})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	leader.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		seen++
		main := root.Flags().Lookup(f.Name)
		if main == nil {
			t.Errorf("leader has --%s, which mini-kcm itself does not", f.Name)
			return
		}
		if f.Usage != main.Usage || f.DefValue != main.DefValue {
			t.Errorf("--%s differs: leader %q (default %q), mini-kcm %q (default %q)", f.Name, f.Usage, f.DefValue, main.Usage, main.DefValue)
		}
	})
	if seen < 4 {
		t.Errorf("leader has %d flags, want at least --kubeconfig, --master and the two Lease flags", seen)
	}
}

func TestLeaderListsTheShardsAndTheirHolders(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	renewed := metav1.NewMicroTime(now.Add(-time.Second))
	base := "mini-kcm"
	lease := func(name, role, epoch, holder string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: sharding.Labels(base, role)},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](4), RenewTime: &renewed},
		}
		if epoch != "" {
			l.Labels[sharding.LabelEpoch] = epoch
		}
		return l
	}
	plan := lease(sharding.PlanLeaseName(base), sharding.RolePlan, "", "")
	active, before := sharding.Epoch{Number: 2, Plan: sharding.Equal(3)}, sharding.Epoch{Number: 1, Plan: sharding.Equal(3)}
	plan.Annotations = map[string]string{sharding.AnnotationPlan: active.String()}
	client := fake.NewClientset(
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: base},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a_1")}},
		plan,
		lease(sharding.ShardLeaseName(base, 0), sharding.RoleShard, active.Label(0), "a_1"),
		lease(sharding.ShardLeaseName(base, 1), sharding.RoleShard, active.Label(1), "b_2"),
		lease(sharding.ShardLeaseName(base, 2), sharding.RoleShard, before.Label(2), ""),
		lease(sharding.MemberLeaseName(base, "a_1"), sharding.RoleMember, "", "a_1"),
		lease(sharding.MemberLeaseName(base, "b_2"), sharding.RoleMember, "", "b_2"),
	)
	var out bytes.Buffer
	if err := printLeader(context.Background(), &out, client, "kube-system", base, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Sharded: the holder above coordinates; 2 live replicas: a_1, b_2",
		"Plan: epoch 2, 3 shards",
		"0      [0x0000000000000000, 0x5555555555555556)   a_1                  1s ago",
		"1      [0x5555555555555556, 0xaaaaaaaaaaaaaaab)   b_2                  1s ago",
		"2      [0xaaaaaaaaaaaaaaab, 0x10000000000000000)  <being handed over>  1s ago",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not contain %q:\n%s", want, out.String())
		}
	}
}

// `mini-kcm leader` reads the Lease once, so it judges expiry by renewTime
// (sharding.ExpiredByRenewTime, the rule every reader shares): strictly after the
// duration, never for a renewTime ahead of this clock, and a Lease never renewed is
// said to be so rather than expired.
func TestLeaderSaysWhetherTheLeaseExpiredByTheSharedRule(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	renewed := func(ago time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(-ago)); return &m }
	for _, c := range []struct {
		name    string
		holder  string
		renewed *metav1.MicroTime
		want    string
	}{
		{"renewed within its duration", "a_1", renewed(4 * time.Second), "4s (valid by this machine's clock)"},
		{"renewed longer ago than its duration", "a_1", renewed(5 * time.Second), "4s (expired by this machine's clock)"},
		{"renewed ahead of this clock", "a_1", renewed(-time.Minute), "4s (valid by this machine's clock)"},
		{"never renewed", "a_1", nil, "4s (never renewed: a standby takes it a lease duration after it first reads it)"},
		{"released", "", renewed(0), "4s (released)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewClientset(&coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "mini-kcm"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(c.holder), LeaseDurationSeconds: ptr.To[int32](4),
					RenewTime: c.renewed},
			})
			var out bytes.Buffer
			if err := printLeader(context.Background(), &out, client, "kube-system", "mini-kcm", now); err != nil {
				t.Fatal(err)
			}
			if want := "Lease duration:  " + c.want; !strings.Contains(out.String(), want) {
				t.Errorf("output does not contain %q:\n%s", want, out.String())
			}
		})
	}
}
