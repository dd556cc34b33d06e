package ha

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestUnreachableAPIServerAtStartRetriesWithBackoffThenExitsOne: mini-kcm started
// against an apiserver that refuses connections, or one whose connections hang, waits
// a bounded time with growing delays between attempts, then exits 1 with a message
// saying what it tried and what to check. A kubeconfig that cannot work is rejected at
// once, naming the file.
func TestUnreachableAPIServerAtStartRetriesWithBackoffThenExitsOne(t *testing.T) {
	cp := framework.ControlPlane(t)
	adminKubeconfig := cp.KubeconfigPath()
	closedPort, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	refused := kubeconfigWithServer(t, adminKubeconfig, "https://127.0.0.1:"+strconv.Itoa(closedPort))

	u, err := url.Parse(cp.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	hanging, err := StartProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hanging.Close)
	hanging.Blackhole()
	hangs := kubeconfigWithServer(t, adminKubeconfig, hanging.URL())

	notAURL := kubeconfigWithServer(t, adminKubeconfig, "https//127.0.0.1:6443")
	badCA := filepath.Join(t.TempDir(), "bad-ca.kubeconfig")
	admin, err := os.ReadFile(adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	caData := regexp.MustCompile(`certificate-authority-data: \S+`)
	if err := os.WriteFile(badCA, caData.ReplaceAll(admin, []byte("certificate-authority-data: bm90IGEgY2VydGlmaWNhdGU=")), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		kubeconfig string
		want       []string
		// waits is whether mini-kcm waits for the apiserver (about 10s) before exiting.
		waits bool
		// minAttempts is the least number of probes expected within the wait.
		minAttempts int
	}{
		{name: "connection refused", kubeconfig: refused, waits: true, minAttempts: 5,
			want: []string{"did not become healthy within 10s", "connection refused", "check that it is running and reachable"}},
		{name: "connections hang", kubeconfig: hangs, waits: true, minAttempts: 2,
			want: []string{"did not become healthy within 10s", hanging.Addr()}},
		{name: "server is not a URL", kubeconfig: notAURL,
			want: []string{`--kubeconfig="` + notAURL + `"`, "is unusable", "host must be a URL"}},
		{name: "certificate authority is not PEM", kubeconfig: badCA,
			want: []string{`--kubeconfig="` + badCA + `"`, "is unusable", "unable to load root certificates"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No leader election takes place, so the cases can share the time.
			t.Parallel()
			begin := time.Now()
			res := framework.RunMiniKCM(t, time.Minute, "--kubeconfig="+tt.kubeconfig, "--secure-port=0", "--v=2",
				"--leader-elect-resource-name=ha-startup")
			took := time.Since(begin)
			if res.ExitCode != 1 {
				t.Errorf("exit code %d, want 1", res.ExitCode)
			}
			for _, want := range tt.want {
				if !strings.Contains(res.Output, want) {
					t.Errorf("output does not contain %q", want)
				}
			}
			if !tt.waits {
				if took > 15*time.Second {
					t.Errorf("took %v to reject a broken kubeconfig, want at once", took)
				}
				if strings.Contains(res.Output, "Waiting for the apiserver") {
					t.Errorf("waited for the apiserver with a broken kubeconfig")
				}
			} else {
				attempts := probeTimes(res.Output)
				gaps := make([]string, 0, len(attempts))
				for i := 1; i < len(attempts); i++ {
					gaps = append(gaps, attempts[i].Sub(attempts[i-1]).Round(10*time.Millisecond).String())
				}
				t.Logf("HA-NUMBERS startup %q exit=%d after %.1fs, %d attempts, gaps %v", tt.name, res.ExitCode, took.Seconds(), len(attempts), gaps)
				if len(attempts) < tt.minAttempts || len(attempts) > 15 {
					t.Errorf("%d attempts to reach the apiserver, want between %d and 15", len(attempts), tt.minAttempts)
				}
				// Between two attempts mini-kcm sleeps 200ms, doubling up to 2s; a gap
				// also holds the failed attempt itself, so the planned delay is a lower
				// bound.
				delay := 200 * time.Millisecond
				for i := 1; i < len(attempts); i++ {
					if gap := attempts[i].Sub(attempts[i-1]); gap < delay-20*time.Millisecond {
						t.Errorf("attempt %d came %v after the previous one, want at least %v: no backoff", i, gap, delay)
					}
					delay = min(2*delay, 2*time.Second)
				}
				if took > 30*time.Second {
					t.Errorf("took %v to give up, want about 10s", took)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", res.Output)
			}
		})
	}
}

// klogTime matches the time of a klog header, e.g. "I1130 06:27:11.759348".
var klogTime = regexp.MustCompile(`^[IWE]\d{4} (\d{2}:\d{2}:\d{2}\.\d{6})`)

// probeTimes returns the times of the log lines that report a failed attempt to reach
// the apiserver: the first ("Waiting for the apiserver") and every retry ("Still
// waiting", logged at -v=1).
func probeTimes(output string) []time.Time {
	var times []time.Time
	for _, line := range strings.Split(output, "\n") {
		if !strings.Contains(line, "Waiting for the apiserver") && !strings.Contains(line, "Still waiting for the apiserver") {
			continue
		}
		m := klogTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse("15:04:05.000000", m[1])
		if err != nil {
			continue
		}
		times = append(times, at)
	}
	return times
}
