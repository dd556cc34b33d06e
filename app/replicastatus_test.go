package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/leaderelection"
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

// replicaStatuszPath is where package serving puts the lines of replicaStatus.
const replicaStatuszPath = "/statusz/replica"

func statuszHandler(status *replicaStatus) http.Handler {
	return serving.NewHandler(Version(), serving.HealthChecks{}, false, nil, status.fields())
}

// readyAs returns a readiness in role, with the given caches, informers and shutdown, as
// the replica's stages set them.
func readyAs(role serving.Role, caches *controllers.CacheSyncTracker, informers func() []string, stopping bool) *serving.Readiness {
	r := &serving.Readiness{}
	switch role {
	case serving.RoleStandby:
		r.SetStandby()
	case serving.RoleLeading:
		r.SetLeading()
	}
	if caches != nil {
		r.SetControllersBuilt(caches)
	}
	if informers != nil {
		r.SetInformers(informers)
	}
	if stopping {
		r.SetStopping()
	}
	return r
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
	leader := func() *electionStatus {
		e := &electionStatus{now: func() time.Time { return statuszSeen }}
		e.joined("host_a")
		e.observe(resourcelock.LeaderElectionRecord{HolderIdentity: "host_a", LeaderTransitions: 4,
			AcquireTime: metav1.NewTime(statuszNow.Add(-5 * time.Minute))})
		return e
	}
	standby := func() *electionStatus {
		e := &electionStatus{now: func() time.Time { return statuszSeen }}
		e.joined("host_b")
		e.observe(resourcelock.LeaderElectionRecord{HolderIdentity: "host_a", LeaderTransitions: 4,
			AcquireTime: metav1.NewTime(statuszNow.Add(-5 * time.Minute))})
		return e
	}
	tests := []struct {
		name     string
		mode     *replicaMode
		ready    *serving.Readiness
		election *electionStatus
		want     map[string]string
	}{
		{
			name:  "a leader whose caches partly synced",
			ready: readyAs(serving.RoleLeading, syncedCaches([]string{"deployment-controller"}, "replicaset-controller", "pods"), nil, false),
			mode:  modeOf(t, true, true, false, 1), election: leader(),
			want: map[string]string{
				"Leader election": "leading (warm standby mode) | Lease kube-system/mini-kube-controller-manager | identity host_a | " +
					"holder this replica (seen 2s ago) | acquired 2026-12-01T08:25:00Z (5m ago) | transitions 4",
				"Controllers": "deployment-controller, replicaset-controller (disabled: endpoints-controller)",
				"Caches":      "synced: deployment-controller | waiting for: replicaset-controller (pods)",
				"Write fence": "in-process",
			},
		},
		{
			name:  "a leader whose controllers' Run has not started",
			ready: readyAs(serving.RoleLeading, syncedCaches(nil, "replicaset-controller"), nil, false),
			mode:  modeOf(t, true, false, false, 1), election: leader(),
			want: map[string]string{
				"Leader election": "leading (cold standby mode) | Lease kube-system/mini-kube-controller-manager | identity host_a | " +
					"holder this replica (seen 2s ago) | acquired 2026-12-01T08:25:00Z (5m ago) | transitions 4",
				"Caches": "synced: none | waiting for: replicaset-controller (not started)",
			},
		},
		{
			name:  "a warm standby whose informers synced",
			ready: readyAs(serving.RoleStandby, nil, func() []string { return nil }, false),
			mode:  modeOf(t, true, true, false, 1), election: standby(),
			want: map[string]string{
				"Leader election": "standby (warm) | Lease kube-system/mini-kube-controller-manager | identity host_b | holder host_a (seen 2s ago) | transitions 4",
				"Caches":          "warm standby: shared informers synced",
			},
		},
		{
			name:  "a warm standby whose informers are syncing",
			ready: readyAs(serving.RoleStandby, nil, func() []string { return []string{"*v1.Pod"} }, false),
			mode:  modeOf(t, true, true, false, 1), election: standby(),
			want: map[string]string{"Caches": "warm standby: waiting for shared informers *v1.Pod"},
		},
		{
			name:  "a cold standby",
			ready: readyAs(serving.RoleStandby, nil, nil, false),
			mode:  modeOf(t, true, false, false, 1), election: standby(),
			want: map[string]string{
				"Leader election": "standby (cold) | Lease kube-system/mini-kube-controller-manager | identity host_b | holder host_a (seen 2s ago) | transitions 4",
				"Caches":          "cold standby: none (the informers start on acquiring the Lease)",
			},
		},
		{
			name:     "a replica still waiting for the apiserver",
			mode:     modeOf(t, true, true, false, 1),
			ready:    &serving.Readiness{},
			election: &electionStatus{},
			want: map[string]string{
				"Leader election": "starting (waiting for the apiserver) | Lease kube-system/mini-kube-controller-manager",
				"Caches":          "not started yet",
			},
		},
		{
			name:  "a replica without leader election, shutting down",
			mode:  modeOf(t, false, true, false, 1),
			ready: readyAs(serving.RoleLeading, syncedCaches(enabled, ""), nil, true),
			want: map[string]string{
				"Leader election": "not electing (--leader-elect=false), running the controllers without a Lease | shutting down",
				"Caches":          "synced: deployment-controller, replicaset-controller",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status := &replicaStatus{ready: tc.ready, mode: tc.mode, election: tc.election, enabled: enabled,
				disabled: []string{"endpoints-controller"}, now: func() time.Time { return statuszNow }}
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

func TestElectionStatusKnowsTheAcquireTimeOnlyWhileThisReplicaHolds(t *testing.T) {
	e := &electionStatus{}
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

func TestReplicaStatuszSaysWhenTheTermIsPausedAndCountsPausesAndLosses(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	s := &replicaStatus{now: func() time.Time { return now }}
	if got := s.termParts(leaderelection.LeaseStats{}); got != nil {
		t.Errorf("termParts(nothing happened) = %q, want nothing", got)
	}
	got := strings.Join(s.termParts(leaderelection.LeaseStats{Pauses: 2, Resumes: 1, PausedSince: now.Add(-3 * time.Second)}), " | ")
	if want := "paused 3s ago: writes fenced until a renewal succeeds | pauses 2, resumes 1, lost 0"; got != want {
		t.Errorf("termParts = %q, want %q", got, want)
	}
}

// /statusz/replica's Informers line says, per resource, whether the informers started
// last are connected, since when, when each last received anything, and why a
// disconnected one failed.
func TestReplicaStatuszSaysWhichInformersAreConnected(t *testing.T) {
	release := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release // an open watch
		case r.URL.Path == "/apis/apps/v1/replicasets":
			_, _ = io.WriteString(w, `{"kind":"ReplicaSetList"}`)
		default:
			http.Error(w, "forbidden", http.StatusForbidden)
		}
	}))
	defer server.Close()
	defer close(release) // before the server waits for its handlers
	tracker := reconnect.NewInformers("mini-kcm")
	client := &http.Client{Transport: reconnect.NewGate(func(context.Context) error { return nil }).Wrap(http.DefaultTransport, tracker)}
	for _, path := range []string{"/apis/apps/v1/replicasets", "/api/v1/services?watch=true"} {
		resp, err := client.Get(server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	watch, err := client.Get(server.URL + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Body.Close()

	var connections atomic.Pointer[reconnect.Informers]
	status := &replicaStatus{ready: &serving.Readiness{}, mode: &replicaMode{}, connections: &connections}
	if _, _, body := getStatusz(t, statuszHandler(status), replicaStatuszPath, ""); !statuszLine("Informers", "none running").MatchString(body) {
		t.Errorf("before any informer started:\n%s", body)
	}
	connections.Store(tracker)
	_, _, body := getStatusz(t, statuszHandler(status), replicaStatuszPath, "")
	want := regexp.MustCompile(`(?m)^Informers: mini-kcm: pods connected 0s ago \(received never\), ` +
		`replicasets.apps disconnected never \(received 0s ago\), services disconnected never \(received never; last error: 403 Forbidden\)$`)
	if !want.MatchString(body) {
		t.Errorf("/statusz/replica does not say which informers are connected:\n%s", body)
	}
}
