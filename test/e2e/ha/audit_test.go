package ha

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// mutatingVerbs are the audit verbs that change an object.
var mutatingVerbs = map[string]bool{
	"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true,
}

// controllerResources are the resources whose writes show that a replica acts as the
// controller manager (subresources such as replicasets/status count too). Leases and
// events are left out: standbys write Leases by design, and events say nothing about
// the cluster's state.
var controllerResources = map[string]bool{
	"pods": true, "replicasets": true, "deployments": true, "endpoints": true,
}

// isControllerWrite reports whether e is a completed write to a controller resource.
func isControllerWrite(e *controlplane.AuditEvent) bool {
	return e.Stage == "ResponseComplete" && e.ObjectRef != nil &&
		mutatingVerbs[e.Verb] && controllerResources[e.ObjectRef.Resource]
}

// writeWindow is the span of time in which one user wrote controller resources: from
// the moment the apiserver received its first write to the moment it finished its last
// one. Any write, successful or not, counts: a rejected write was still an attempt to
// act. Two replicas whose windows overlap both acted as leader at some moment, which
// is split brain.
type writeWindow struct {
	user        string
	first, last time.Time
	writes      int
}

func (w writeWindow) String() string {
	return fmt.Sprintf("%s: %d writes from %s to %s", w.user, w.writes,
		w.first.Format("15:04:05.000000"), w.last.Format("15:04:05.000000"))
}

// writeWindows returns the write windows of users that wrote at all, ordered by their
// first write.
func writeWindows(events []controlplane.AuditEvent, users []string) []writeWindow {
	byUser := map[string]*writeWindow{}
	for _, u := range users {
		byUser[u] = nil
	}
	for i := range events {
		e := &events[i]
		if _, ok := byUser[e.By]; !ok || !isControllerWrite(e) {
			continue
		}
		w := byUser[e.By]
		if w == nil {
			w = &writeWindow{user: e.By, first: e.RequestReceivedTimestamp, last: e.StageTimestamp}
			byUser[e.By] = w
		}
		if e.RequestReceivedTimestamp.Before(w.first) {
			w.first = e.RequestReceivedTimestamp
		}
		if e.StageTimestamp.After(w.last) {
			w.last = e.StageTimestamp
		}
		w.writes++
	}
	var windows []writeWindow
	for _, w := range byUser {
		if w != nil {
			windows = append(windows, *w)
		}
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].first.Before(windows[j].first) })
	return windows
}

// overlaps returns a description of every pair of windows that share a moment. Windows
// are closed intervals, so touching ends overlap too.
func overlaps(windows []writeWindow) []string {
	var out []string
	for i := range windows {
		for j := i + 1; j < len(windows); j++ {
			a, b := windows[i], windows[j]
			if !a.last.Before(b.first) && !b.last.Before(a.first) {
				out = append(out, fmt.Sprintf("%s overlaps %s", a, b))
			}
		}
	}
	return out
}

// requestFilter selects audit events for counting.
type requestFilter struct {
	users     map[string]bool
	namespace string
	resource  string // with "/subresource" if any
	verb      string
	// codes, when set, keeps only these response codes.
	codes []int32
}

func (r requestFilter) count(events []controlplane.AuditEvent) int {
	n := 0
	for i := range events {
		e := &events[i]
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil {
			continue
		}
		if (r.users != nil && !r.users[e.By]) || (r.namespace != "" && e.ObjectRef.Namespace != r.namespace) ||
			(r.resource != "" && e.Resource() != r.resource) || (r.verb != "" && e.Verb != r.verb) {
			continue
		}
		if len(r.codes) > 0 && !containsCode(r.codes, e.Code()) {
			continue
		}
		n++
	}
	return n
}

func containsCode(codes []int32, c int32) bool {
	for _, code := range codes {
		if code == c {
			return true
		}
	}
	return false
}

// readAudit reads the audit log after a short pause, so that requests answered just
// now have been written.
func readAudit(t testing.TB, cp *controlplane.ControlPlane) []controlplane.AuditEvent {
	t.Helper()
	time.Sleep(time.Second)
	events, err := framework.AuditLog(cp)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// userSet makes a set of user names for requestFilter.
func userSet(users ...string) map[string]bool {
	s := map[string]bool{}
	for _, u := range users {
		s[u] = true
	}
	return s
}

// describeWrites summarises a user's controller writes by verb and resource, for logs.
func describeWrites(events []controlplane.AuditEvent, user string) string {
	counts := map[string]int{}
	for i := range events {
		e := &events[i]
		if e.By == user && isControllerWrite(e) {
			counts[e.Verb+" "+e.Resource()]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, counts[k])
	}
	return strings.Join(parts, " ")
}

func TestWriteWindowsOverlapOnlyWhenTheyShareAMoment(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	event := func(user, verb, resource string, from, to float64) controlplane.AuditEvent {
		e := controlplane.AuditEvent{Stage: "ResponseComplete", Verb: verb,
			RequestReceivedTimestamp: at(from), StageTimestamp: at(to)}
		e.By = user
		e.ObjectRef = &struct {
			Resource    string `json:"resource"`
			Namespace   string `json:"namespace"`
			Name        string `json:"name"`
			APIGroup    string `json:"apiGroup"`
			APIVersion  string `json:"apiVersion"`
			Subresource string `json:"subresource"`
		}{Resource: resource}
		return e
	}
	tests := []struct {
		name    string
		events  []controlplane.AuditEvent
		windows int
		overlap bool
	}{
		{
			name: "one leader after the other",
			events: []controlplane.AuditEvent{
				event("a", "create", "pods", 1, 1.1), event("a", "update", "replicasets", 2, 2.1),
				event("b", "create", "pods", 3, 3.1),
			},
			windows: 2,
		},
		{
			name: "a write of the old leader finishing after the new leader's first",
			events: []controlplane.AuditEvent{
				event("a", "create", "pods", 1, 3.5), event("b", "create", "pods", 3, 3.1),
			},
			windows: 2, overlap: true,
		},
		{
			name: "standby lease renewals and events do not count",
			events: []controlplane.AuditEvent{
				event("a", "create", "pods", 1, 1.1), event("b", "update", "leases", 1, 1.1),
				event("b", "create", "events", 1.05, 1.06), event("a", "get", "pods", 4, 4.1),
			},
			windows: 1,
		},
		{
			name: "a failed write counts",
			events: []controlplane.AuditEvent{
				event("a", "delete", "endpoints", 1, 2), event("b", "patch", "pods", 1.5, 1.6),
			},
			windows: 2, overlap: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			windows := writeWindows(tt.events, []string{"a", "b"})
			if len(windows) != tt.windows {
				t.Fatalf("got %d windows %v, want %d", len(windows), windows, tt.windows)
			}
			if got := len(overlaps(windows)) > 0; got != tt.overlap {
				t.Errorf("overlap = %v, want %v: %v", got, tt.overlap, windows)
			}
		})
	}
}
