package main

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// auditEvent builds an audit event of a request made with the token credential.
func auditEvent(at time.Time, verb, resource, name, credential string, code int32, issued string) controlplane.AuditEvent {
	var e controlplane.AuditEvent
	e.Verb, e.UserAgent, e.RequestReceivedTimestamp = verb, "mini-kcm/v0.0.0 (test)", at
	e.User.Extra = map[string][]string{controlplane.CredentialIDKey: {credential}}
	res, sub, _ := strings.Cut(resource, "/")
	e.ObjectRef = &struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	}{Resource: res, Subresource: sub, Namespace: "app", Name: name}
	e.ResponseStatus = &struct {
		Code int32 `json:"code"`
	}{Code: code}
	if issued != "" {
		e.Annotations = map[string]string{controlplane.IssuedCredentialIDAnnotation: issued}
	}
	return e
}

// Writes are attributed through the token chain (a replica's own token requests a
// controller's token, which writes), and an accepted write of a replica that does not
// hold the Lease is stale, a refused one is not.
func TestTimelineAttributesWritesByCredentialAndFindsStaleOnes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	changes := []holderChange{
		{at: at(0), to: "id-a"},
		{at: at(10), from: "id-a", to: "id-b"},
	}
	names := map[string]string{"id-a": "mini-kcm-0", "id-b": "mini-kcm-1"}
	credentials := map[string]string{"JTI=a": "mini-kcm-0", "JTI=b": "mini-kcm-1"}
	events := []controlplane.AuditEvent{
		auditEvent(at(0.5), "create", "serviceaccounts/token", "replicaset-controller", "JTI=a", 201, "JTI=rs-a"),
		auditEvent(at(0.6), "create", "serviceaccounts/token", "replicaset-controller", "JTI=b", 201, "JTI=rs-b"),
		auditEvent(at(1), "create", "pods", "web-1", "JTI=rs-a", 201, ""),                 // a leads: fine
		auditEvent(at(11), "create", "pods", "web-2", "JTI=rs-b", 201, ""),                // b leads: fine
		auditEvent(at(12), "update", "replicasets/status", "web", "JTI=rs-a", 200, ""),    // a no more: stale
		auditEvent(at(12.5), "create", "pods", "web-3", "JTI=rs-a", 409, ""),              // refused: not stale
		auditEvent(at(13), "update", "leases", "lease", "JTI=a", 409, ""),                 // the election: not drawn
		auditEvent(at(14), "create", "pods", "web-4", "JTI=somebody-else", 201, ""),       // not a replica's
		auditEvent(at(-5), "create", "endpoints", "before-watching", "JTI=rs-b", 201, ""), // before the watcher: not judged
	}
	tl := buildTimeline(changes, events, credentials, names, []string{"mini-kcm-0", "mini-kcm-1", "mini-kcm-2"}, []mark{
		{at: at(5), replica: "mini-kcm-0", signal: "SIGSTOP"},
	}, at(20))

	if len(tl.writes) != 4 {
		t.Fatalf("writes = %+v, want the 4 writes of the replicas' controllers since the first holder", tl.writes)
	}
	stale := tl.staleWrites()
	if len(stale) != 1 || stale[0].replica != "mini-kcm-0" || stale[0].what != "update replicasets/status app/web" {
		t.Errorf("stale writes = %+v, want mini-kcm-0's status update after it lost the Lease", stale)
	}

	var svg bytes.Buffer
	if err := tl.writeSVG(&svg, "test"); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Errorf("not well-formed: %v\n%s", err, svg.String())
	}
	for _, want := range []string{"mini-kcm-0", "mini-kcm-2", "SIGSTOP", "(1)", "update replicasets/status app/web"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("the drawing does not show %q", want)
		}
	}
}
