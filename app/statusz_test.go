package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/statusz/api/v1beta1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// getStatusz requests path with an Accept header ("" for none).
func getStatusz(t *testing.T, h http.Handler, path, accept string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Result().Header, string(body)
}

// statuszLine matches the line of the given field with the given value.
func statuszLine(name, value string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+": "+value) + `$`)
}

var (
	statuszNow  = time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	statuszSeen = statuszNow.Add(-2 * time.Second)
)

func statuszHandler(status *replicaStatus) http.Handler {
	return newHandler(healthChecks{}, false, nil, status.fields())
}

// syncedCaches returns a tracker where every controller but waiting synced.
func syncedCaches(synced []string, waiting string, informers ...string) *controllers.CacheSyncTracker {
	caches := &controllers.CacheSyncTracker{}
	for _, c := range synced {
		caches.Expect(c)
		caches.WaitForCacheSync(context.Background(), c)
	}
	if waiting != "" {
		caches.Expect(waiting)
		if len(informers) > 0 {
			var syncs []controllers.InformerSync
			for _, name := range informers {
				syncs = append(syncs, controllers.InformerSync{Name: name, Synced: func() bool { return false }})
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			caches.WaitForCacheSync(ctx, waiting, syncs...)
		}
	}
	return caches
}

func TestReplicaStatuszSaysThisReplicasRoleLeaseControllersCachesAndFence(t *testing.T) {
	enabled := []string{"deployment-controller", "replicaset-controller"}
	fence := func() string { return "in-process (Lease fence)" }
	leader := func(warm bool) *electionStatus {
		e := &electionStatus{lease: "kube-system/mini-kcm", warmStandby: warm, now: func() time.Time { return statuszSeen }}
		e.joined("host_a")
		e.observe(resourcelock.LeaderElectionRecord{HolderIdentity: "host_a", LeaderTransitions: 4,
			AcquireTime: metav1.NewTime(statuszNow.Add(-5 * time.Minute))})
		return e
	}
	standby := func(warm bool) *electionStatus {
		e := &electionStatus{lease: "kube-system/mini-kcm", warmStandby: warm, now: func() time.Time { return statuszSeen }}
		e.joined("host_b")
		e.observe(resourcelock.LeaderElectionRecord{HolderIdentity: "host_a", LeaderTransitions: 4,
			AcquireTime: metav1.NewTime(statuszNow.Add(-5 * time.Minute))})
		return e
	}
	tests := []struct {
		name     string
		ready    *readiness
		election *electionStatus
		want     map[string]string
	}{
		{
			name:     "a leader whose caches partly synced",
			ready:    &readiness{role: roleLeading, caches: syncedCaches([]string{"deployment-controller"}, "replicaset-controller", "pods")},
			election: leader(true),
			want: map[string]string{
				"Leader election": "leading (warm standby mode) | Lease kube-system/mini-kcm | identity host_a | " +
					"holder this replica (seen 2s ago) | acquired 2026-12-01T08:25:00Z (5m ago) | transitions 4",
				"Controllers": "deployment-controller, replicaset-controller (disabled: endpoints-controller)",
				"Caches":      "synced: deployment-controller | waiting for: replicaset-controller (pods)",
				"Write fence": "in-process (Lease fence)",
			},
		},
		{
			name:     "a leader whose controllers' Run has not started",
			ready:    &readiness{role: roleLeading, caches: syncedCaches(nil, "replicaset-controller")},
			election: leader(false),
			want: map[string]string{
				"Leader election": "leading (cold standby mode) | Lease kube-system/mini-kcm | identity host_a | " +
					"holder this replica (seen 2s ago) | acquired 2026-12-01T08:25:00Z (5m ago) | transitions 4",
				"Caches": "synced: none | waiting for: replicaset-controller (not started)",
			},
		},
		{
			name:     "a warm standby whose informers synced",
			ready:    &readiness{role: roleStandby, informers: func() []string { return nil }},
			election: standby(true),
			want: map[string]string{
				"Leader election": "standby (warm) | Lease kube-system/mini-kcm | identity host_b | holder host_a (seen 2s ago) | transitions 4",
				"Caches":          "warm standby: shared informers synced",
			},
		},
		{
			name:     "a warm standby whose informers are syncing",
			ready:    &readiness{role: roleStandby, informers: func() []string { return []string{"*v1.Pod"} }},
			election: standby(true),
			want:     map[string]string{"Caches": "warm standby: waiting for shared informers *v1.Pod"},
		},
		{
			name:     "a cold standby",
			ready:    &readiness{role: roleStandby},
			election: standby(false),
			want: map[string]string{
				"Leader election": "standby (cold) | Lease kube-system/mini-kcm | identity host_b | holder host_a (seen 2s ago) | transitions 4",
				"Caches":          "cold standby: none (the informers start on acquiring the Lease)",
			},
		},
		{
			name:     "a replica still waiting for the apiserver",
			ready:    &readiness{},
			election: &electionStatus{lease: "kube-system/mini-kcm", warmStandby: true},
			want: map[string]string{
				"Leader election": "starting (waiting for the apiserver) | Lease kube-system/mini-kcm",
				"Caches":          "not started yet",
			},
		},
		{
			name:  "a replica without leader election, shutting down",
			ready: &readiness{role: roleLeading, caches: syncedCaches(enabled, ""), stopping: true},
			want: map[string]string{
				"Leader election": "not electing (--leader-elect=false), running the controllers without a Lease | shutting down",
				"Caches":          "synced: deployment-controller, replicaset-controller",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status := &replicaStatus{ready: tc.ready, election: tc.election, enabled: enabled,
				disabled: []string{"endpoints-controller"}, fenceMode: fence, now: func() time.Time { return statuszNow }}
			code, header, body := getStatusz(t, statuszHandler(status), replicaStatuszPath, "")
			if code != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "text/plain") ||
				header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("GET %s = %d %v, want 200 text/plain, nosniff", replicaStatuszPath, code, header)
			}
			// The fields come in their order, after a header that says the page is for people.
			if !strings.HasPrefix(body, "mini-kcm replica statusz\nWarning: ") ||
				strings.Index(body, "Leader election") > strings.Index(body, "Controllers") ||
				strings.Index(body, "Caches") > strings.Index(body, "Write fence") {
				t.Errorf("body does not have the header and the fields in order:\n%s", body)
			}
			for name, value := range tc.want {
				if !statuszLine(name, value).MatchString(body) {
					t.Errorf("body has no line %q with %q:\n%s", name, value, body)
				}
			}
		})
	}
}

func TestStatuszIsTheLibrarysAndListsTheReplicasPage(t *testing.T) {
	status := &replicaStatus{ready: &readiness{role: roleLeading}, fenceMode: func() string { return "off" }}
	h := statuszHandler(status)
	code, header, body := getStatusz(t, h, "/statusz", "application/json;v=v1beta1;g=config.k8s.io;as=Statusz")
	if code != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /statusz as JSON = %d %s %q, want 200 application/json", code, header.Get("Content-Type"), body)
	}
	var s v1beta1.Statusz
	decoder := json.NewDecoder(bytes.NewReader([]byte(body)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&s); err != nil {
		t.Fatalf("decoding %q as v1beta1.Statusz: %v", body, err)
	}
	if s.Kind != "Statusz" || s.APIVersion != "config.k8s.io/v1beta1" || s.Name != componentName ||
		!strings.Contains(strings.Join(s.Paths, " "), "/metrics") || s.BinaryVersion == "" {
		t.Errorf("decoded %+v, want the library's v1beta1 Statusz of mini-kcm", s)
	}
	if code, _, body := getStatusz(t, h, "/statusz", ""); code != http.StatusOK ||
		!strings.Contains(body, "mini-kcm statusz") || strings.Contains(body, "Leader election") {
		t.Errorf("GET /statusz = %d %q, want the library's text alone", code, body)
	}
}

func TestReplicaStatuszKeepsEachFieldOnOneLine(t *testing.T) {
	fields := []statuszField{{name: "Holder", value: func() string { return "<b>x</b>\nforged: line" }}}
	_, _, body := getStatusz(t, replicaStatusz(fields), replicaStatuszPath, "")
	if !strings.HasSuffix(body, "\n\nHolder: <b>x</b> forged: line\n") {
		t.Errorf("body = %q, want the value on the field's one line", body)
	}
}

func TestElectionStatusKnowsTheAcquireTimeOnlyWhileThisReplicaHolds(t *testing.T) {
	e := &electionStatus{lease: "kube-system/mini-kcm"}
	e.joined("me")
	acquired := metav1.NewTime(statuszNow)
	e.observe(resourcelock.LeaderElectionRecord{HolderIdentity: "me", AcquireTime: acquired, LeaderTransitions: 1})
	if got := e.snapshot(); !got.acquired.Equal(statuszNow) || got.holder != "me" || got.transitions != 1 {
		t.Errorf("after our own record: %+v", got)
	}
	e.observe(resourcelock.LeaderElectionRecord{HolderIdentity: "", AcquireTime: acquired, LeaderTransitions: 1})
	if got := e.snapshot(); !got.acquired.IsZero() || got.holder != "" {
		t.Errorf("after a release: %+v, want no acquire time", got)
	}
}
