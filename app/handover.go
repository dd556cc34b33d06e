package app

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/handover"
	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/options/controllersflag"
)

// errHandoverUnsound is returned by `mini-kcm handover check` when some controller has
// no owner, two, or not the wanted one; the report above it says which and the fix.
var errHandoverUnsound = errors.New("hand-over check failed: see the problems above")

// newHandoverCommand returns `mini-kcm handover`, whose subcommands help hand the
// controllers over from kube-controller-manager and back.
func newHandoverCommand(reg *controllers.Registry) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "handover",
		Short: "Check who runs each controller: kube-controller-manager, mini-kcm, both or neither",
		Args:  noArgs,
	}
	cmd.AddCommand(newHandoverCheckCommand(reg))
	return cmd
}

func newHandoverCheckCommand(reg *controllers.Registry) *cobra.Command {
	generic := options.NewGenericOptions()
	le := options.NewLeaderElectionOptions()
	var manifest, want string
	// kubeadm names a node after its host, lower case (kubeadm's GetHostname).
	nodeName, _ := os.Hostname()
	nodeName = strings.ToLower(nodeName)
	controllersFlag := []string{"*"}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Print who runs each of mini-kcm's controllers and fail unless each has exactly one owner",
		Long: `Print, for each of mini-kcm's controllers, who runs it in the cluster: upstream
(kube-controller-manager), mini-kcm, BOTH (they fight over the same objects) or NEITHER.

kube-controller-manager's --controllers is read from this node's static pod manifest
(--kcm-manifest, or ` + handover.DefaultManifestPath + ` when it exists) and from its pods in
kube-system (label component=kube-controller-manager, as kubeadm and kind set), one per
control-plane node, the pod of --node-name skipped when the manifest was read; each is
evaluated as kube-controller-manager ` + "v1.37.2" + ` does, and instances that disagree on one of
mini-kcm's controllers are a problem. It runs while its Lease is held. mini-kcm runs while
its Lease is held and renewed, the --controllers of its replicas' pods (label
app.kubernetes.io/name=mini-kcm), sharded each shard's namespaces while the shard's Lease is
held; with deploy/fence/ installed, a dry-run write as its leader checks that the apiserver
admits the leader's writes. Exits 0 when each controller has exactly one owner (the --want
one, if given), 1 otherwise, naming the problem and the fix. Managed control planes, where
kube-controller-manager's flags cannot be changed, are out of scope.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printVersionIfRequested(cmd.OutOrStdout(), cmd.Flags()) {
				return nil
			}
			wanted := handover.Owner(want)
			if wanted != "" && wanted != handover.OwnerMiniKCM && wanted != handover.OwnerUpstream {
				return fmt.Errorf("--want=%q: must be %q or %q", want, handover.OwnerMiniKCM, handover.OwnerUpstream)
			}
			if errs := controllersflag.Unknown(reg, controllersFlag); len(errs) > 0 {
				return fmt.Errorf("--controllers: %v", errs)
			}
			cfg, err := generic.RESTConfig()
			if err != nil {
				return err
			}
			cfg.UserAgent = userAgent("handover-check")
			cfg.Timeout = 10 * time.Second
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("building the Kubernetes client: %w", err)
			}
			impersonate := func(user string, extra map[string][]string) (kubernetes.Interface, error) {
				as := rest.CopyConfig(cfg)
				as.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: extra}
				// The probe writes Endpoints, which v1.33 deprecated: not news to the reader.
				as.WarningHandler = rest.NoWarnings{}
				return kubernetes.NewForConfig(as)
			}
			sources := handover.Sources{Client: client, ManifestPath: manifest, NodeName: nodeName, LeaseNamespace: le.ResourceNamespace,
				LeaseName: le.ResourceName, Controllers: controllersFlag, ControllersGiven: cmd.Flags().Changed("controllers"),
				Impersonate: impersonate, Now: time.Now()}
			up, err := sources.Upstream(cmd.Context())
			if err != nil {
				return err
			}
			mk, err := sources.MiniKCM(cmd.Context())
			if err != nil {
				return err
			}
			sources.ProbeFence(cmd.Context(), &mk)
			report := handover.Evaluate(reg, up, mk, wanted)
			report.Print(cmd.OutOrStdout())
			if !report.OK() {
				return errHandoverUnsound
			}
			return nil
		},
	}
	var fss cliflag.NamedFlagSets
	generic.AddConnectionFlags(fss.FlagSet("generic"))
	le.AddLeaseFlags(fss.FlagSet("leader election"))
	hs := fss.FlagSet("hand-over")
	hs.StringVar(&manifest, "kcm-manifest", "", "Path of kube-controller-manager's static pod manifest. Empty means "+
		handover.DefaultManifestPath+" if it exists, else its pods in kube-system.")
	hs.StringVar(&nodeName, "node-name", nodeName, "The node whose static pod manifest --kcm-manifest is: its "+
		"kube-controller-manager pod is skipped, since the manifest is what its kubelet runs next. Default: this host's "+
		"name, kubeadm's default node name.")
	hs.StringVar(&want, "want", "", `Who should run the controllers: "mini-kcm" or "upstream". Empty accepts either, as long as each controller has exactly one owner.`)
	hs.StringSliceVar(&controllersFlag, "controllers", controllersFlag, "mini-kcm's --controllers, which the check assumes its "+
		"Lease holder runs (the Lease does not say). Unset, the check reads it from the replicas' pods, and assumes \"*\" "+
		"only when it finds none.")
	fss.FlagSet("misc").BoolP("help", "h", false, "help for check")
	for _, name := range fss.Order {
		cmd.Flags().AddFlagSet(fss.FlagSets[name])
	}
	cliflag.SetUsageAndHelpFunc(cmd, fss, terminalWidth(cmd.OutOrStdout()))
	return cmd
}
