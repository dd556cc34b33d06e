package framework

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// leaseEvent is one accepted write of Lease name in kube-system by user at second s of
// the test, recorded with its body as the test control plane's audit policy does:
// holder and label are the shard Lease's, plan the plan Lease's active epoch.
func leaseEvent(t *testing.T, verb, name, user string, s float64, holder, label, plan string) controlplane.AuditEvent {
	t.Helper()
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
	event := map[string]any{
		"stage": "ResponseComplete", "verb": verb, "requestURI": "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/" + name,
		"user":                     map[string]any{"username": user},
		"userAgent":                "mini-kcm/v0 (leader-election)",
		"objectRef":                map[string]any{"resource": "leases", "namespace": "kube-system", "name": name, "apiGroup": "coordination.k8s.io"},
		"responseStatus":           map[string]any{"code": 200},
		"requestReceivedTimestamp": at, "stageTimestamp": at,
	}
	if verb != "delete" {
		l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", ResourceVersion: fmt.Sprint(int(s * 1000))}}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		if label != "" {
			l.Labels = map[string]string{sharding.LabelEpoch: label}
		}
		if plan != "" {
			l.Annotations = map[string]string{sharding.AnnotationPlan: plan}
		}
		event["responseObject"] = l
	}
	line, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	var e controlplane.AuditEvent
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	e.By = e.User.Username // as ReadAuditLog sets it
	return e
}

func TestAssertShardWritesByHoldersFailsOnAWriteNoHolderCouldMake(t *testing.T) {
	// Two tenants cut into two shards at the higher one's hash: the lower tenant is in
	// shard 0, the higher in shard 1.
	low, high := "t1", "t2"
	if namespaceHash(low) > namespaceHash(high) {
		low, high = high, low
	}
	cut := namespaceHash(high)
	epoch1 := fmt.Sprintf("1/0x%016x", cut)
	ranged := func(shard int) string { // the label with its range, as "<epoch>.<first>-<last>"
		if shard == 0 {
			return fmt.Sprintf("1.%016x-%016x", 0, cut-1)
		}
		return fmt.Sprintf("1.%016x-%016x", cut, uint64(1<<64-1))
	}
	term := func(shard, epoch int, start int) string {
		return fmt.Sprintf("mini-kcm/v0 (replicaset-controller; shard %d, epoch %d, term %d)", shard, epoch, start)
	}
	const r1, r2 = "mini-kcm-replica-1", "mini-kcm-replica-2"
	// history is the Leases' life in which every write below is right: the plan at
	// epoch 1, each shard Lease created by the coordinator for itself, then taken by a
	// replica and renewed.
	history := func(label func(int) string) []controlplane.AuditEvent {
		return []controlplane.AuditEvent{
			leaseEvent(t, "create", "kcm-plan", r1, 0, "", "", epoch1),
			leaseEvent(t, "create", "kcm-0", r1, 0.1, "recreated-by-the-shard-coordinator", label(0), ""),
			leaseEvent(t, "create", "kcm-1", r1, 0.1, "recreated-by-the-shard-coordinator", label(1), ""),
			leaseEvent(t, "update", "kcm-0", r1, 1, "id-1", label(0), ""),
			leaseEvent(t, "update", "kcm-1", r2, 1, "id-2", label(1), ""),
			leaseEvent(t, "update", "kcm-0", r1, 2, "id-1", label(0), ""),
			leaseEvent(t, "update", "kcm-1", r2, 2, "id-2", label(1), ""),
		}
	}
	plain := func(int) string { return "1" }
	good := []controlplane.AuditEvent{
		auditEvent(t, "create", "pods", low, r1, term(0, 1, 1000), 201, 1.5),
		auditEvent(t, "update", "replicasets", low, r1, term(0, 1, 1000), 200, 2.5),
		auditEvent(t, "create", "pods", high, r2, term(1, 1, 1001), 201, 1.6),
	}
	for _, tc := range []struct {
		name  string
		label func(int) string
		more  []controlplane.AuditEvent
		want  string // in every error expected; "" for none
	}{
		{name: "each write by the holder of its shard's Lease", label: plain},
		{name: "labels that carry their range", label: ranged},
		{name: "a write by a replica after its Lease moved to another", label: plain, more: []controlplane.AuditEvent{
			leaseEvent(t, "update", "kcm-0", r2, 5, "id-2", "1", ""),
			auditEvent(t, "delete", "pods", low, r1, term(0, 1, 1000), 200, 5.5),
		}, want: "was not held by " + r1},
		{name: "a write received at the same instant as the takeover", label: plain, more: []controlplane.AuditEvent{
			leaseEvent(t, "update", "kcm-0", r2, 5, "id-2", "1", ""),
			auditEvent(t, "delete", "pods", low, r1, term(0, 1, 1000), 200, 5),
		}},
		{name: "a write after its term released the Lease", label: plain, more: []controlplane.AuditEvent{
			leaseEvent(t, "update", "kcm-0", r1, 4, "", "1", ""),
			auditEvent(t, "delete", "pods", low, r1, term(0, 1, 1000), 200, 4.5),
		}, want: "was not held by " + r1},
		{name: "a write before the Lease was taken", label: plain, more: []controlplane.AuditEvent{
			auditEvent(t, "create", "pods", high, r2, term(1, 1, 999), 201, 0.9),
		}, want: "was not held by " + r2},
		{name: "an old term's write after its replica took the Lease again", label: plain, more: []controlplane.AuditEvent{
			leaseEvent(t, "update", "kcm-0", r1, 4, "", "1", ""),
			leaseEvent(t, "update", "kcm-0", r1, 4.2, "id-1", "1", ""),
			auditEvent(t, "delete", "pods", low, r1, term(0, 1, 1000), 200, 4.5),
		}, want: "in two holdings"},
		{name: "a write for a namespace outside the shard's range", label: plain, more: []controlplane.AuditEvent{
			auditEvent(t, "create", "pods", high, r1, term(0, 1, 1000), 201, 2.5),
		}, want: "outside shard 0's range"},
		{name: "a write whose epoch the Lease's label does not carry", label: plain, more: []controlplane.AuditEvent{
			auditEvent(t, "create", "pods", low, r1, term(0, 2, 1000), 201, 2.5),
		}, want: "names epoch 2"},
		{name: "a label whose range is not the plan's", label: func(int) string { return fmt.Sprintf("1.%016x-%016x", 0, cut) }, want: "the label names the range"},
		{name: "an epoch number that comes back with other cuts, under labels without ranges", label: plain, more: []controlplane.AuditEvent{
			leaseEvent(t, "update", "kcm-plan", r1, 3, "", "", fmt.Sprintf("1/0x%016x", cut-1)),
		}, want: "its label does not say which"},
		{name: "an epoch number that comes back with other cuts, under labels that carry their range", label: ranged, more: []controlplane.AuditEvent{
			leaseEvent(t, "update", "kcm-plan", r1, 3, "", "", fmt.Sprintf("1/0x%016x", cut-1)),
		}},
		{name: "a write of the holder of a deleted Lease before a replica takes it", label: plain, more: []controlplane.AuditEvent{
			leaseEvent(t, "delete", "kcm-0", "admin", 4, "", "", ""),
			leaseEvent(t, "create", "kcm-0", r2, 4.01, "recreated-by-the-shard-coordinator", "1", ""),
			auditEvent(t, "delete", "pods", low, r1, term(0, 1, 1000), 200, 5),
		}},
		{name: "a write of the holder of a deleted Lease after a replica took it", label: plain, more: []controlplane.AuditEvent{
			leaseEvent(t, "delete", "kcm-0", "admin", 4, "", "", ""),
			leaseEvent(t, "create", "kcm-0", r2, 4.01, "recreated-by-the-shard-coordinator", "1", ""),
			leaseEvent(t, "update", "kcm-0", r2, 8, "id-2", "1", ""),
			auditEvent(t, "delete", "pods", low, r1, term(0, 1, 1000), 200, 8.5),
		}, want: "was not held by " + r1},
		{name: "a write that names no term", label: plain, more: []controlplane.AuditEvent{
			auditEvent(t, "create", "pods", low, r1, "mini-kcm/v0 (replicaset-controller)", 201, 2.5),
		}, want: "names no shard term"},
		{name: "a write whose apiserver-fence extra names another holder", label: plain, more: []controlplane.AuditEvent{
			withHolderExtra(auditEvent(t, "create", "pods", low, r1, term(0, 1, 1000), 201, 2.5), "id-2"),
		}, want: "names holder id-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := append(append(history(tc.label), good...), tc.more...)
			r := &recorder{TB: t}
			AssertShardWritesByHolders(r, events, ShardScope{LeaseNamespace: "kube-system", LeaseName: "kcm", Namespaces: []string{low, high}})
			switch {
			case tc.want == "" && len(r.errors) != 0:
				t.Errorf("reported %q; want nothing", r.errors)
			case tc.want != "" && len(r.errors) == 0:
				t.Errorf("reported nothing; want an error saying %q", tc.want)
			}
			for _, e := range r.errors {
				if tc.want != "" && !strings.Contains(e, tc.want) {
					t.Errorf("reported %q; want only errors saying %q", e, tc.want)
				}
			}
		})
	}
}

func withHolderExtra(e controlplane.AuditEvent, holder string) controlplane.AuditEvent {
	e.ImpersonatedUser = &struct {
		Username string              `json:"username"`
		Groups   []string            `json:"groups"`
		Extra    map[string][]string `json:"extra"`
	}{Username: e.User.Username, Extra: map[string][]string{"mini-kcm.io/lease-holder": {holder}}}
	return e
}

func TestLeaseHistoryRefusesAHole(t *testing.T) {
	noBody := leaseEvent(t, "update", "kcm-0", "mini-kcm-replica-1", 1, "id-1", "1", "")
	noBody.ResponseObject = nil
	deleteAll := leaseEvent(t, "delete", "kcm-0", "admin", 2, "", "", "")
	deleteAll.Verb, deleteAll.ObjectRef.Name = "deletecollection", ""
	for _, tc := range []struct {
		event controlplane.AuditEvent
		want  string
	}{{noBody, "no body"}, {deleteAll, "does not say which"}} {
		if _, err := LeaseHistory([]controlplane.AuditEvent{tc.event}, "kube-system", func(string) bool { return true }); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LeaseHistory of a %s: %v; want an error saying %q", tc.event.Verb, err, tc.want)
		}
	}
}

func TestParseShardTermReadsTheUserAgentsOfTheTerms(t *testing.T) {
	got, ok := ParseShardTerm("mini-kcm/v0.1 (linux/amd64) replicaset-controller (replicaset-controller; shard 12, epoch 7, term 1764763200123)")
	if want := (ShardTerm{Shard: 12, Epoch: "7", Start: "1764763200123"}); !ok || got != want {
		t.Errorf("ParseShardTerm: %+v, %v; want %+v", got, ok, want)
	}
	for _, agent := range []string{"mini-kcm/v0 (replicaset-controller)", "mini-kcm/v0 (leader-election; shard x, epoch 1, term 2)"} {
		if got, ok := ParseShardTerm(agent); ok {
			t.Errorf("ParseShardTerm(%q) = %+v; want none", agent, got)
		}
	}
}
