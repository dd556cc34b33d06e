package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
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

// A dense timeline (many signals within a second, at the very start and the very end,
// long replica names) is still readable: no label covers another, the signals' labels
// stay above the lanes, the legend below the axis, and everything inside the drawing.
func TestTimelineLabelsNeitherOverlapNorLeaveTheDrawing(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	replicas := []string{"mini-kcm-0", "a-much-longer-replica-name-1", "mini-kcm-2"}
	tl := &timeline{replicas: replicas, start: t0, end: at(30)}
	signals := []string{"SIGTERM", "SIGKILL", "SIGSTOP", "SIGCONT"}
	add := func(s float64, i int) {
		tl.marks = append(tl.marks, mark{at: at(s), replica: replicas[i%len(replicas)], signal: signals[i%len(signals)]})
	}
	for i := range 12 {
		add(14+0.08*float64(i), i)
	}
	add(0, 1)
	add(30, 1) // at the right edge: its label must end left of its line
	add(29.7, 2)
	tl.holds = []hold{{replica: replicas[0], from: t0, till: at(14)}, {replica: replicas[1], from: at(15)}}

	l := tl.layOut("mini-kcm failover: who held the Lease, who wrote (lease 4s, renew 2s, retry 500ms)",
		"accepted while not holding the Lease (0)")
	drawing := box{w: l.width, h: l.height}
	boxes := l.labels()
	for i, a := range boxes {
		if !a.inside(drawing) {
			t.Errorf("label %d %+v is not inside the drawing %+v", i, a, drawing)
		}
		for j, b := range boxes[:i] {
			if a.overlaps(b) {
				t.Errorf("labels %d %+v and %d %+v overlap", j, b, i, a)
			}
		}
	}
	for i, m := range l.marks {
		b := m.box()
		if b.y+b.h > l.lanesTop {
			t.Errorf("the signal's label %q (%+v) reaches into the lanes, which start at %.0f", m.text, b, l.lanesTop)
		}
		// Each signal's dashed line runs from its label's row down to the axis.
		for j, other := range l.marks {
			lineX, lineTop := l.x(tl, tl.marks[j].at), other.y-svgFont+2
			if j != i && lineX >= b.x && lineX <= b.x+b.w && lineTop < b.y+b.h {
				t.Errorf("the line of %q crosses the label %q", other.text, m.text)
			}
		}
	}
	for _, it := range l.legend {
		if it.box().y < l.axis {
			t.Errorf("the legend's %q is not below the time axis", it.text)
		}
	}
	last := l.marks[13]
	if lineX := l.x(tl, tl.marks[13].at); last.x+last.box().w > lineX {
		t.Errorf("the last signal's label %+v does not end left of its line at %.0f", last.box(), lineX)
	}

	var svg bytes.Buffer
	if err := tl.writeSVG(&svg, "dense"); err != nil {
		t.Fatal(err)
	}
	var root struct {
		ViewBox string `xml:"viewBox,attr"`
	}
	if err := xml.Unmarshal(svg.Bytes(), &root); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	if want := fmt.Sprintf("0 0 %.0f %.0f", l.width, l.height); root.ViewBox != want {
		t.Errorf("viewBox = %q, want %q", root.ViewBox, want)
	}
}
