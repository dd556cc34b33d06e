package foundation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestBadConfigurationExitsOneWithAClearMessage runs the binary with one mistake at a
// time on an otherwise valid command line; each must stop the process at once with
// exit code 1 and a message naming the problem.
func TestBadConfigurationExitsOneWithAClearMessage(t *testing.T) {
	kubeconfig := framework.ControlPlane(t).KubeconfigPath()
	dir := t.TempDir()
	malformed := filepath.Join(dir, "malformed.kubeconfig")
	if err := os.WriteFile(malformed, []byte("apiVersion: v1\nkind: Config\nclusters: {this is: [not, a kubeconfig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	valid := "--kubeconfig=" + kubeconfig

	tests := []struct {
		name        string
		args        []string
		wantMessage string
	}{
		{
			name:        "lease duration shorter than renew deadline",
			args:        []string{valid, "--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=3s"},
			wantMessage: "--leader-elect-lease-duration (2s) must be greater than --leader-elect-renew-deadline (3s)",
		},
		{
			name:        "renew deadline within 1.2 retry periods",
			args:        []string{valid, "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=1s"},
			wantMessage: "--leader-elect-renew-deadline (1s) must be greater than 1.2 × --leader-elect-retry-period (1s)",
		},
		{
			name:        "zero workers",
			args:        []string{valid, "--concurrent-replicaset-syncs=0"},
			wantMessage: "--concurrent-replicaset-syncs must be greater than 0",
		},
		{
			name:        "endpoints lock type",
			args:        []string{valid, "--leader-elect-resource-lock=endpoints"},
			wantMessage: `--leader-elect-resource-lock must be "leases"`,
		},
		{
			name:        "kubeconfig that does not exist",
			args:        []string{"--kubeconfig=" + filepath.Join(dir, "missing.kubeconfig")},
			wantMessage: "does not exist",
		},
		{
			name:        "kubeconfig that cannot be read",
			args:        []string{"--kubeconfig=" + dir},
			wantMessage: "cannot be read",
		},
		{
			name:        "malformed kubeconfig",
			args:        []string{"--kubeconfig=" + malformed},
			wantMessage: "is not a valid kubeconfig file",
		},
		{
			name:        "positional argument",
			args:        []string{valid, "extra-argument"},
			wantMessage: `does not take any arguments, got ["extra-argument"]`,
		},
		{
			name:        "unknown controller",
			args:        []string{valid, "--controllers=replicaset,no-such-controller"},
			wantMessage: `"no-such-controller" is not in the list of known controllers`,
		},
		{
			name:        "unknown flag",
			args:        []string{valid, "--no-such-flag"},
			wantMessage: "no-such-flag",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Serving is off so that no case ever races another for a port.
			res := framework.RunMiniKCM(t, 20*time.Second, append(tt.args, "--secure-port=0")...)
			if res.ExitCode != 1 {
				t.Errorf("exit code %d, want 1; output:\n%s", res.ExitCode, res.Output)
			}
			if !strings.Contains(res.Output, tt.wantMessage) {
				t.Errorf("output does not contain %q:\n%s", tt.wantMessage, res.Output)
			}
		})
	}
}
