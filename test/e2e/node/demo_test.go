package node

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The failover demo kind users run, deploy/demo/failover.sh, on the real kubelet (make
// demo-node): the same script, with this node's signal hook (signal-container.sh) and
// overlays that set the node's images. It must succeed, its takeovers must take what the
// protocol allows, and the apiserver must have accepted no write of the frozen leader
// after the takeover.
func TestTheFailoverDemoScriptRunsOnTheRealNode(t *testing.T) {
	importImages(t)
	cp := framework.ControlPlane(t)

	deployDir := overlay(t, "deploy", map[string]string{deployImageName: miniKCMImage})
	sampleDir := overlay(t, "deploy/sample", map[string]string{agnhostImage: sampleImage})
	// The script installs both; they go as after the other tests (sample first).
	uninstallDeployOnCleanup(t, "deploy", deployDir)
	uninstallSampleOnCleanup(t, sampleDir)

	results := filepath.Join(t.TempDir(), "results")
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, repoPath(t, "deploy/demo/failover.sh"))
	cmd.Env = append(os.Environ(),
		// The script runs the kubectl built with the control plane, and ctr (signal hook).
		"PATH="+controlplane.BinDir()+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cp.KubeconfigPath(),
		"SIGNAL_CONTAINER="+repoPath(t, "test/e2e/node/signal-container.sh"),
		"MINI_KCM_NODE_CONTAINERD="+cp.ContainerdAddress(),
		"MINI_KCM_KUSTOMIZATION="+deployDir,
		"SAMPLE_KUSTOMIZATION="+sampleDir,
		"RESULTS_FILE="+results,
	)
	began := time.Now()
	if err := runLogged(t, cmd); err != nil {
		t.Fatalf("deploy/demo/failover.sh on the real node: %v (its output is above)", err)
	}
	t.Logf("NODE-NUMBERS deploy/demo/failover.sh took %.1fs", time.Since(began).Seconds())

	got := readResults(t, results)
	lease := time.Duration(resultInt(t, got, "lease_duration_s")) * time.Second
	graceful := time.Duration(resultInt(t, got, "graceful_takeover_ms")) * time.Millisecond
	crash := time.Duration(resultInt(t, got, "crash_takeover_ms")) * time.Millisecond
	freeze := time.Duration(resultInt(t, got, "freeze_takeover_ms")) * time.Millisecond
	t.Logf("NODE-NUMBERS demo script: graceful %.2fs, crash %.2fs, freeze %.2fs (lease %v, retry %v)",
		graceful.Seconds(), crash.Seconds(), freeze.Seconds(), lease, defaultRetryPeriod)
	// The script's clock starts before the hook's kubectl and ctr deliver the signal
	// (crash takeovers of 4.4-5.5s here, against 4.4s in failover_test.go), and a
	// loaded machine adds its scheduling delays: the bounds tell a released Lease
	// from an expired one, and one expiry from a missed one (2 leases).
	if graceful >= lease {
		t.Errorf("graceful takeover took %v, not under the lease duration %v: the deleted leader did not release the Lease", graceful, lease)
	}
	if bound := lease + defaultRetryPeriod; crash > bound+2*time.Second || freeze > bound+2*time.Second {
		t.Errorf("takeovers after SIGKILL (%v) and SIGSTOP (%v), want about lease+retry = %v (+2s for the script's own calls)", crash, freeze, bound)
	}
	if n := resultInt(t, got, "frozen_leader_restarts"); n != 0 {
		t.Errorf("the resumed frozen leader restarted %d times, want none: a lost Lease makes a standby, not an exit", n)
	}

	frozenHolder := got["frozen_holder"]
	frozenAt := time.UnixMilli(int64(resultInt(t, got, "frozen_at_ms")))
	late := writesAfterTakeover(t, cp, frozenHolder, holderPod(frozenHolder), frozenAt)
	t.Logf("NODE-NUMBERS writes of the frozen leader %s accepted after the takeover: %d", holderPod(frozenHolder), len(late))
	if len(late) > 0 {
		t.Errorf("the apiserver accepted %d writes of the frozen leader after the takeover, want none:\n  %s", len(late), strings.Join(late, "\n  "))
	}
}

// runLogged runs cmd with its output, stdout and stderr interleaved, in the test log
// line by line as it comes.
func runLogged(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := bufio.NewScanner(r)
		for s.Scan() {
			t.Log(s.Text())
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	err := cmd.Run()
	_ = w.Close()
	wg.Wait()
	return err
}

// readResults parses a RESULTS_FILE: one name=value a line.
func readResults(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the demo script wrote no RESULTS_FILE: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			got[name] = value
		}
	}
	return got
}

func resultInt(t *testing.T, results map[string]string, name string) int {
	t.Helper()
	n, err := strconv.Atoi(results[name])
	if err != nil {
		t.Fatalf("RESULTS_FILE has no integer %s (%v): %v", name, results, err)
	}
	return n
}
