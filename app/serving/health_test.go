package serving

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// refusingAPIServer is an address that refuses connections. A port freed by closing a
// test server would not do: it is in the ephemeral range, where a process starting
// beside the tests (another package's control plane) may be given it.
const refusingAPIServer = "http://127.0.0.1:1"

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// endpoint serves checks as path, with a path per check beneath it.
func endpoint(path string, checks ...healthz.HealthChecker) http.Handler {
	m := mux.NewPathRecorderMux("test")
	healthz.InstallPathHandler(m, path, checks...)
	return m
}

func TestHealthEndpointsWithholdReasonsAndServeThemPerCheck(t *testing.T) {
	failing := healthz.NamedCheck("leaderElection", func(*http.Request) error { return errors.New("failed to renew") })
	tests := []struct {
		name     string
		checks   []healthz.HealthChecker
		target   string
		wantCode int
		wantBody string
	}{
		{"passing checks answer ok", []healthz.HealthChecker{healthz.PingHealthz}, "/healthz", 200, "ok"},
		{"verbose lists every check", []healthz.HealthChecker{healthz.PingHealthz}, "/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n"},
		{"a failure withholds the reason", []healthz.HealthChecker{healthz.PingHealthz, failing}, "/healthz", 500,
			"[+]ping ok\n[-]leaderElection failed: reason withheld\nhealthz check failed\n"},
		{"verbose withholds the reason too", []healthz.HealthChecker{healthz.PingHealthz, failing}, "/healthz?verbose", 500,
			"[+]ping ok\n[-]leaderElection failed: reason withheld\nhealthz check failed\n"},
		{"the check's own path gives the reason", []healthz.HealthChecker{healthz.PingHealthz, failing}, "/healthz/leaderElection", 500,
			"internal server error: failed to renew\n"},
		{"an excluded failure passes", []healthz.HealthChecker{healthz.PingHealthz, failing}, "/healthz?verbose&exclude=leaderElection", 200,
			"[+]ping ok\n[+]leaderElection excluded: ok\nhealthz check passed\n"},
		{"excluding an unknown check warns", []healthz.HealthChecker{healthz.PingHealthz}, "/healthz?verbose&exclude=nope", 200,
			"[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, endpoint("/healthz", tc.checks...), tc.target)
			if code != tc.wantCode || body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestHandlerServesHealthMetricsAndProfilingOnlyWhenEnabled(t *testing.T) {
	failing := healthz.NamedCheck("x", func(*http.Request) error { return errors.New("no") })
	checks := HealthChecks{
		livez:   []healthz.HealthChecker{healthz.PingHealthz},
		healthz: []healthz.HealthChecker{healthz.PingHealthz},
		readyz:  []healthz.HealthChecker{healthz.PingHealthz, failing},
	}
	h := NewHandler(testVersion, checks, true, nil, nil)
	for target, want := range map[string]int{
		"/livez": 200, "/healthz": 200, "/readyz": 500, "/readyz/x": 500, "/livez/ping": 200, "/healthz/ping": 200,
		"/metrics": 200, "/debug/pprof/": 200, "/statusz": 200, "/healthz/nope": 404, "/": 404,
	} {
		if code, _ := get(t, h, target); code != want {
			t.Errorf("GET %s = %d, want %d", target, code, want)
		}
	}
	if code, _ := get(t, NewHandler(testVersion, checks, false, nil, nil), "/debug/pprof/"); code != 404 {
		t.Errorf("GET /debug/pprof/ with --profiling=false = %d, want 404", code)
	}
}

func TestReadyzIsTrueForAHealthyStandbyOrASyncedLeader(t *testing.T) {
	r := &Readiness{}
	h := endpoint("/readyz", r.Checks()...)
	// expect checks /readyz/<check>, which gives the reason, and that /readyz agrees.
	expect := func(step, check string, wantCode int, wantInBody string) {
		t.Helper()
		code, body := get(t, h, "/readyz/"+check)
		if code != wantCode || !strings.Contains(body, wantInBody) {
			t.Errorf("%s: /readyz/%s = %d %q, want %d containing %q", step, check, code, body, wantCode, wantInBody)
		}
		if code, body := get(t, h, "/readyz"); code != wantCode {
			t.Errorf("%s: /readyz = %d %q, want %d", step, code, body, wantCode)
		}
	}
	expect("starting", "controllers", 500, "waiting for the apiserver")
	r.SetStandby()
	expect("standby", "controllers", 200, "ok")
	r.SetLeading()
	expect("leading, building", "controllers", 500, "building controllers")
	caches := &controllers.CacheSyncTracker{}
	caches.Expect("replicaset-controller")
	r.SetControllersBuilt(caches)
	expect("leading, caches not synced", "controllers", 500, "replicaset-controller waits for informers")
	ctx := context.Background()
	caches.WaitForCacheSync(ctx, "replicaset-controller", controllers.InformerSync{Name: "pods", Synced: func() bool { return true }})
	expect("leading, caches synced", "controllers", 200, "ok")
	r.SetStopping()
	expect("stopping", "shutdown", 500, "shutting down")
}

// restClientFor returns a real REST client for a test server.
func restClientFor(t *testing.T, url string) rest.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: url})
	if err != nil {
		t.Fatal(err)
	}
	return client.Discovery().RESTClient()
}

func TestAPIServerProbeReportsTheLastAnswer(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if !healthy.Load() {
			http.Error(w, "[-]etcd failed: reason withheld", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer apiserver.Close()
	p := NewAPIServerProbe(restClientFor(t, apiserver.URL), apiserver.URL)
	if err := p.check(nil); err == nil || !strings.Contains(err.Error(), "not contacted yet") {
		t.Errorf("before the first probe: %v", err)
	}
	if err := p.WaitUntilHealthy(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("WaitUntilHealthy() = %v", err)
	}
	if err := p.check(nil); err != nil {
		t.Errorf("after a healthy answer: %v", err)
	}
	healthy.Store(false)
	if err := p.probe(context.Background()); err == nil || p.check(nil) == nil ||
		!strings.Contains(p.check(nil).Error(), "apiserver "+apiserver.URL+" is not healthy") {
		t.Errorf("after an unhealthy answer: probe %v, check %v", err, p.check(nil))
	}
}

func TestUnreachableAPIServerFailsTheStartWithAClearMessage(t *testing.T) {
	url := refusingAPIServer
	p := NewAPIServerProbe(restClientFor(t, url), url)
	start := time.Now()
	err := p.WaitUntilHealthy(context.Background(), time.Second)
	if err == nil {
		t.Fatal("WaitUntilHealthy() = nil, want an error")
	}
	for _, want := range []string{"the apiserver at " + url + " did not become healthy within 1s", "connection refused", "--kubeconfig or --master"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("gave up after %s, want about 1s", elapsed)
	}
}

func TestShutdownWhileWaitingForTheAPIServerIsNotAnError(t *testing.T) {
	p := NewAPIServerProbe(restClientFor(t, refusingAPIServer), refusingAPIServer)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	if err := p.WaitUntilHealthy(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitUntilHealthy() = %v, want context.Canceled", err)
	}
}

func TestLivezFailsNamingTheControllerAndKeyOfAStuckSync(t *testing.T) {
	now := time.Unix(0, 0)
	syncs := &controllers.InFlightSyncs{Threshold: time.Minute, Now: func() time.Time { return now }}
	livez := endpoint("/livez", healthz.PingHealthz, stuckSyncCheck(syncs))
	done := syncs.Started("replicaset-controller", "default/web")
	now = now.Add(2 * time.Minute)
	code, body := get(t, livez, "/livez?verbose")
	if want := "[-]controller-syncs failed: reason withheld\n"; code != 500 || !strings.Contains(body, want) {
		t.Errorf("/livez?verbose: got %d %q, want 500 with %q", code, body, want)
	}
	code, body = get(t, livez, "/livez/controller-syncs")
	want := "syncs stuck longer than 1m0s: replicaset-controller has synced \"default/web\" for 2m0s\n"
	if code != 500 || !strings.Contains(body, want) {
		t.Errorf("/livez/controller-syncs: got %d %q, want 500 with %q", code, body, want)
	}
	done()
	if code, _ := get(t, livez, "/livez"); code != 200 {
		t.Errorf("after the sync returned: %d, want 200", code)
	}
}
