package endpoints

import (
	"fmt"
	"strings"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// controllerUserAgentSuffix ends the user agent of the endpoints controller's client,
// "mini-kcm/<version> (endpoints-controller)"; the informers and the event recorder use
// clients of their own.
const controllerUserAgentSuffix = "(endpoints-controller)"

// auditMark returns the current length of the audit log, in events; writes counted from
// it are those made afterwards. The log is only ever appended to.
func (e *env) auditMark() int {
	e.t.Helper()
	events, err := framework.AuditLog(e.ControlPlane)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(events)
}

// write is one request of the controller that changed, or tried to change, an
// Endpoints.
type write struct {
	verb, name string
	code       int32
}

func (w write) String() string { return fmt.Sprintf("%s %s (HTTP %d)", w.verb, w.name, w.code) }

// endpointsWritesSince returns the Endpoints writes in the test's namespace that the
// replica's endpoints controller made after mark, in the order the apiserver finished
// them.
func (e *env) endpointsWritesSince(mark int) []write {
	e.t.Helper()
	var writes []write
	for _, ev := range e.auditEventsSince(mark) {
		if isEndpointsWrite(ev, e.replica.Name, e.Namespace) {
			writes = append(writes, write{verb: ev.Verb, name: ev.ObjectRef.Name, code: ev.Code()})
		}
	}
	return writes
}

// auditEventsSince returns the audit events logged after mark.
func (e *env) auditEventsSince(mark int) []controlplane.AuditEvent {
	e.t.Helper()
	events, err := framework.AuditLog(e.ControlPlane)
	if err != nil {
		e.t.Fatal(err)
	}
	return events[mark:]
}

// isEndpointsWrite reports whether an audit event is a write to Endpoints in namespace
// by user's endpoints controller.
func isEndpointsWrite(ev controlplane.AuditEvent, user, namespace string) bool {
	if ev.By != user || !strings.HasSuffix(ev.UserAgent, controllerUserAgentSuffix) {
		return false
	}
	if ev.Resource() != "endpoints" || ev.ObjectRef.Namespace != namespace {
		return false
	}
	switch ev.Verb {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}
