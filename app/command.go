// Package app assembles mini-kcm: the cobra command, the clients, the health and metrics
// endpoint, leader election, and the start and shutdown order of the controllers.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/options"
)

// NewCommand returns the mini-kcm command with the compiled-in controllers.
func NewCommand() *cobra.Command {
	return newCommand(newRegistry())
}

func newCommand(reg *controllers.Registry) *cobra.Command {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use: "mini-kcm",
		Long: `mini-kcm runs control loops of the Kubernetes controller manager. A control loop
watches the shared state of the cluster through the apiserver and makes changes attempting
to move the current state towards the desired state. Run several replicas for high
availability. With one shard (the default) they elect a leader through a Lease: the leader
runs the controllers and the others stand by. With --shards above 1 they share the work:
the namespaces are cut into shards, each with a Lease of its own, and every replica runs
the controllers on the namespaces of the shards it holds. "mini-kcm leader" prints who
holds the Lease and, sharded, the plan and each shard's holder.

Controllers: ` + strings.Join(reg.Names(), ", ") + `.

Supported kube-apiserver versions: ` + options.SupportedAPIServers() + ` (tested; a newer one
is warned about at start).`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// mini-kcm watches whatever the cluster serves; deprecation warnings would
			// repeat on every list and are for API clients written by humans.
			rest.SetDefaultWarningHandler(rest.NoWarnings{})
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printVersionIfRequested(cmd.OutOrStdout(), cmd.Flags()) {
				return nil
			}
			// Apply logging first, so that everything after logs in the chosen format. The
			// logging gates (LoggingAlphaOptions for --log-*-split-stream, ...) are ours.
			if err := logsapi.ValidateAndApply(opts.Logs, opts.FeatureGates.Gate); err != nil {
				return err
			}
			warnIfRequestBodiesLogged(klog.Background(), opts)
			cliflag.PrintFlags(cmd.Flags())
			cfg, err := opts.Config(reg)
			if err != nil {
				return reportInvalid(cmd.ErrOrStderr(), err)
			}
			// kubernetes_feature_enabled{name,stage}, as upstream reports its gates.
			opts.FeatureGates.Gate.AddMetrics()
			ctx, stop := withShutdownSignals(context.Background(), func(code int) {
				klog.FlushAndExit(klog.ExitFlushTimeout, code)
			})
			defer stop()
			return Run(ctx, cfg, reg)
		},
		Args: noArgs,
	}

	fss := opts.Flags(reg)
	for _, name := range fss.Order {
		cmd.Flags().AddFlagSet(fss.FlagSets[name])
	}
	cliflag.SetUsageAndHelpFunc(cmd, fss, terminalWidth(cmd.OutOrStdout()))

	cmd.AddCommand(newLeaderCommand())
	cmd.AddCommand(newHandoverCommand(reg))
	return cmd
}

// noArgs rejects positional arguments with kube-controller-manager's message: a stray
// word is usually a flag with a missing "--" or a value split by the shell.
func noArgs(cmd *cobra.Command, args []string) error {
	for _, arg := range args {
		if len(arg) > 0 {
			return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
		}
	}
	return nil
}

// terminalWidth is the width --help wraps to: the terminal's, or no wrapping when the
// output is not a terminal.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil {
			return cols
		}
	}
	return 0
}

// reportInvalid prints every configuration problem on a line of its own and returns a
// short error for cli.Run to log. The log line alone would join all problems into one
// line and escape their quotes, which is hard to read for whoever fixes the flags.
func reportInvalid(w io.Writer, err error) error {
	problems := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		problems = agg.Errors()
	}
	fmt.Fprintln(w, "Error: invalid configuration:")
	for _, p := range problems {
		fmt.Fprintf(w, "  - %v\n", p)
	}
	return fmt.Errorf("invalid configuration: %d problem(s), listed above", len(problems))
}
