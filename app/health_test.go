package app

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

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mini-kcm/mini-kcm/controllers"
)

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestChecksHandlerFollowsTheKubernetesFormat(t *testing.T) {
	failing := healthCheck{name: "leaderElection", check: func(*http.Request) error { return errors.New("failed to renew") }}
	tests := []struct {
		name     string
		checks   []healthCheck
		target   string
		wantCode int
		wantBody string
	}{
		{"passing checks answer ok", []healthCheck{ping}, "/healthz", 200, "ok"},
		{"verbose lists every check", []healthCheck{ping}, "/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n"},
		{"a failure withholds the reason", []healthCheck{ping, failing}, "/healthz", 500,
			"[+]ping ok\n[-]leaderElection failed: reason withheld\nhealthz check failed\n"},
		{"verbose shows the reason", []healthCheck{ping, failing}, "/healthz?verbose", 500,
			"[+]ping ok\n[-]leaderElection failed: failed to renew\nhealthz check failed\n"},
		{"an excluded failure passes", []healthCheck{ping, failing}, "/healthz?verbose&exclude=leaderElection", 200,
			"[+]ping ok\n[+]leaderElection excluded: ok\nhealthz check passed\n"},
		{"excluding an unknown check warns", []healthCheck{ping}, "/healthz?verbose&exclude=nope", 200,
			"[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, checksHandler{endpoint: "healthz", checks: tc.checks}, tc.target)
			if code != tc.wantCode || body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestHandlerServesHealthMetricsAndProfilingOnlyWhenEnabled(t *testing.T) {
	failing := checksHandler{endpoint: "readyz", checks: []healthCheck{{name: "x", check: func(*http.Request) error { return errors.New("no") }}}}
	e := healthEndpoints{
		livez:   checksHandler{endpoint: "livez", checks: []healthCheck{ping}},
		healthz: checksHandler{endpoint: "healthz", checks: []healthCheck{ping}},
		readyz:  failing,
	}
	h := newHandler(e, true, nil, nil)
	for target, want := range map[string]int{
		"/livez": 200, "/healthz": 200, "/readyz": 500, "/metrics": 200, "/debug/pprof/": 200, "/statusz": 200, "/healthz/ping": 404, "/": 404,
	} {
		if code, _ := get(t, h, target); code != want {
			t.Errorf("GET %s = %d, want %d", target, code, want)
		}
	}
	if code, _ := get(t, newHandler(e, false, nil, nil), "/debug/pprof/"); code != 404 {
		t.Errorf("GET /debug/pprof/ with --profiling=false = %d, want 404", code)
	}
}

func TestReadyzIsTrueForAHealthyStandbyOrASyncedLeader(t *testing.T) {
	r := &readiness{}
	h := checksHandler{endpoint: "readyz", checks: r.checks()}
	expect := func(step string, wantCode int, wantInBody string) {
		t.Helper()
		code, body := get(t, h, "/readyz?verbose")
		if code != wantCode || !strings.Contains(body, wantInBody) {
			t.Errorf("%s: got %d %q, want %d containing %q", step, code, body, wantCode, wantInBody)
		}
	}
	expect("starting", 500, "[-]controllers failed: waiting for the apiserver")
	r.setStandby()
	expect("standby", 200, "[+]controllers ok")
	r.setLeading()
	expect("leading, building", 500, "building controllers")
	caches := &controllers.CacheSyncTracker{}
	caches.Expect("replicaset-controller")
	r.setControllersBuilt(caches)
	expect("leading, caches not synced", 500, "replicaset-controller waits for informers")
	ctx := context.Background()
	caches.WaitForCacheSync(ctx, "replicaset-controller", controllers.InformerSync{Name: "pods", Synced: func() bool { return true }})
	expect("leading, caches synced", 200, "[+]controllers ok")
	r.setStopping()
	expect("stopping", 500, "[-]shutdown failed: shutting down")
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
	p := newAPIServerProbe(restClientFor(t, apiserver.URL), apiserver.URL)
	if err := p.check(nil); err == nil || !strings.Contains(err.Error(), "not contacted yet") {
		t.Errorf("before the first probe: %v", err)
	}
	if err := p.waitUntilHealthy(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("waitUntilHealthy() = %v", err)
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
	p := newAPIServerProbe(restClientFor(t, url), url)
	start := time.Now()
	err := p.waitUntilHealthy(context.Background(), time.Second)
	if err == nil {
		t.Fatal("waitUntilHealthy() = nil, want an error")
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
	p := newAPIServerProbe(restClientFor(t, refusingAPIServer), refusingAPIServer)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	if err := p.waitUntilHealthy(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("waitUntilHealthy() = %v, want context.Canceled", err)
	}
}

func TestLivezFailsNamingTheControllerAndKeyOfAStuckSync(t *testing.T) {
	now := time.Unix(0, 0)
	syncs := &controllers.InFlightSyncs{Threshold: time.Minute, Now: func() time.Time { return now }}
	livez := checksHandler{endpoint: "livez", checks: []healthCheck{ping, stuckSyncCheck(syncs)}}
	done := syncs.Started("replicaset-controller", "default/web")
	now = now.Add(2 * time.Minute)
	code, body := get(t, livez, "/livez?verbose")
	want := "[-]controller-syncs failed: syncs stuck longer than 1m0s: replicaset-controller has synced \"default/web\" for 2m0s\n"
	if code != 500 || !strings.Contains(body, want) {
		t.Errorf("got %d %q, want 500 with %q", code, body, want)
	}
	done()
	if code, _ := get(t, livez, "/livez"); code != 200 {
		t.Errorf("after the sync returned: %d, want 200", code)
	}
}
