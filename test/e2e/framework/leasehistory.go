package framework

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// LeaseWrite is one accepted write of a Lease as the audit log records it: the test
// control plane's policy keeps the body of every Lease write (see controlplane's
// auditPolicy), so the Lease's history can be rebuilt from the log alone, on the same
// clock as every other request it records.
type LeaseWrite struct {
	Name, Verb, User string
	// Received is when the apiserver received the request.
	Received time.Time
	// Deleted is set by a deletion; the Lease's fields below are then empty.
	Deleted bool
	// Holder, Labels, Annotations and ResourceVersion are the Lease as written.
	Holder              string
	Labels, Annotations map[string]string
	ResourceVersion     string
}

// LeaseHistory returns, per name of the Leases of namespace that keep accepts, their
// accepted writes in the order the apiserver received them. That is the order in which
// they were applied: a Lease's writers (client-go's election, the shard coordinator)
// update it conditionally on the resourceVersion they read, so each accepted update
// was sent after the write before it had been answered. A write without its body in the
// log (a policy that does not record it) or a deletion of a collection of the
// namespace's Leases (which does not name them) is an error: the history would have a
// hole.
func LeaseHistory(events []controlplane.AuditEvent, namespace string, keep func(name string) bool) (map[string][]LeaseWrite, error) {
	history := map[string][]LeaseWrite{}
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.ObjectRef.Resource != "leases" ||
			e.ObjectRef.APIGroup != "coordination.k8s.io" || e.ObjectRef.Namespace != namespace || e.Code() >= 300 {
			continue
		}
		switch e.Verb {
		case "deletecollection":
			return nil, fmt.Errorf("a deletion of a collection of the Leases of %s at %s (%s): the audit log does not say which",
				namespace, e.RequestReceivedTimestamp.Format(time.StampMilli), e.RequestURI)
		case "create", "update", "patch", "delete":
		default:
			continue
		}
		if !keep(e.ObjectRef.Name) {
			continue
		}
		w := LeaseWrite{Name: e.ObjectRef.Name, Verb: e.Verb, User: e.By, Received: e.RequestReceivedTimestamp}
		if e.Verb == "delete" {
			w.Deleted = true
		} else {
			if len(e.ResponseObject) == 0 {
				return nil, fmt.Errorf("the audit log has no body for the %s of Lease %s/%s at %s: the policy must record Lease writes with their response",
					e.Verb, namespace, w.Name, w.Received.Format(time.StampMilli))
			}
			var l coordinationv1.Lease
			if err := json.Unmarshal(e.ResponseObject, &l); err != nil {
				return nil, fmt.Errorf("the %s of Lease %s/%s at %s: %w", e.Verb, namespace, w.Name, w.Received.Format(time.StampMilli), err)
			}
			if l.Spec.HolderIdentity != nil {
				w.Holder = *l.Spec.HolderIdentity
			}
			w.Labels, w.Annotations, w.ResourceVersion = l.Labels, l.Annotations, l.ResourceVersion
		}
		history[w.Name] = append(history[w.Name], w)
	}
	for _, writes := range history {
		sort.SliceStable(writes, func(i, j int) bool { return writes[i].Received.Before(writes[j].Received) })
	}
	return history, nil
}
