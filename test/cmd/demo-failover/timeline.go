package main

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// A timeline draws the demo from the two sources of truth: the Lease's holder over time
// (as the watcher saw it) and the apiserver's audit log (every write it accepted, and
// from which replica). All three replicas write as the same ServiceAccounts, so the
// audit log tells them apart by credential: each replica's own token has a credential
// ID of its own, the TokenRequests it makes for the controllers' accounts are recorded
// with it and with the ID of the token they issued, and every write carries the ID of
// the token it was made with.

// hold is a span during which a replica held the Lease.
type hold struct {
	replica    string
	from, till time.Time // till is zero while it still holds
}

// write is one write by a replica that the apiserver answered.
type write struct {
	replica string
	at      time.Time
	// what is "verb resource namespace/name" and the response code.
	what string
	code int32
	// stale marks an accepted write made while the replica did not hold the Lease.
	stale bool
}

// mark is a signal the demo sent.
type mark struct {
	at      time.Time
	replica string
	signal  string
}

// timeline is what is drawn.
type timeline struct {
	replicas   []string
	start, end time.Time
	holds      []hold
	writes     []write
	marks      []mark
}

// staleWrites returns the accepted writes made by replicas that did not hold the Lease.
func (tl *timeline) staleWrites() []write {
	var stale []write
	for _, w := range tl.writes {
		if w.stale {
			stale = append(stale, w)
		}
	}
	return stale
}

// holdsAt reports whether replica held the Lease at t, with slack for the watcher's
// polling: a holder change is seen up to one poll late, and a renewal's write may be
// received a moment before the change it causes is seen.
func (tl *timeline) holdsAt(replica string, t time.Time) bool {
	const slack = 2 * leasePollInterval
	for _, h := range tl.holds {
		if h.replica != replica {
			continue
		}
		if !t.Before(h.from.Add(-slack)) && (h.till.IsZero() || t.Before(h.till.Add(slack))) {
			return true
		}
	}
	return false
}

// buildTimeline reads the holder changes and the audit log. credentials maps the
// credential ID of each replica's own token to the replica's name; names maps each
// leader-election identity a replica had to its name.
func buildTimeline(changes []holderChange, events []controlplane.AuditEvent, credentials, names map[string]string,
	replicas []string, marks []mark, end time.Time) *timeline {
	tl := &timeline{replicas: replicas, marks: marks, end: end}
	for i, c := range changes {
		if c.to == "" {
			continue
		}
		h := hold{replica: names[c.to], from: c.at}
		if h.replica == "" {
			h.replica = c.to
		}
		if i+1 < len(changes) {
			h.till = changes[i+1].at
		}
		tl.holds = append(tl.holds, h)
	}
	// The watcher starts after the replicas: the first holder may have written before
	// the watcher saw it hold the Lease, so writes are judged from the first change on.
	var judgedFrom time.Time
	if len(tl.holds) > 0 {
		judgedFrom = tl.holds[0].from
		tl.start = judgedFrom.Add(-time.Second)
	}

	// The controllers' tokens, by the replica whose own token requested them.
	owner := map[string]string{}
	for id, name := range credentials {
		owner[id] = name
	}
	for _, e := range events {
		if e.Verb == "create" && e.Resource() == "serviceaccounts/token" && e.Code() == 201 {
			if name, ok := owner[e.CredentialID()]; ok && e.Annotations[controlplane.IssuedCredentialIDAnnotation] != "" {
				owner[e.Annotations[controlplane.IssuedCredentialIDAnnotation]] = name
			}
		}
	}
	for _, e := range events {
		if !strings.HasPrefix(e.UserAgent, "mini-kcm/") || !slices.Contains([]string{"create", "update", "patch", "delete"}, e.Verb) {
			continue
		}
		resource := e.Resource()
		if resource == "leases" || resource == "events" || resource == "serviceaccounts/token" || resource == "selfsubjectreviews" {
			// The election, events, tokens and the start's check that a controller may
			// impersonate itself (--leader-elect-apiserver-fence) are not the
			// controllers' work.
			continue
		}
		name, ok := owner[e.CredentialID()]
		if !ok || e.RequestReceivedTimestamp.Before(judgedFrom) {
			continue
		}
		w := write{replica: name, at: e.RequestReceivedTimestamp, code: e.Code(),
			what: fmt.Sprintf("%s %s %s/%s", e.Verb, resource, e.ObjectRef.Namespace, e.ObjectRef.Name)}
		w.stale = w.code < 300 && !tl.holdsAt(name, w.at)
		tl.writes = append(tl.writes, w)
	}
	return tl
}

// Layout of the drawing, in pixels.
const (
	svgWidth    = 1100
	svgLeft     = 130 // room for the replica names
	svgRight    = 20
	svgTop      = 70 // room for the title and the signals' labels
	svgLane     = 46
	svgBar      = 18
	svgTickHigh = 14
)

// writeSVG draws the timeline: one lane per replica, the Lease held as a green bar,
// each accepted write as a blue tick (red and taller when the replica did not hold the
// Lease), each refused write as a grey tick, the signals as dashed lines.
func (tl *timeline) writeSVG(w io.Writer, title string) error {
	height := svgTop + svgLane*len(tl.replicas) + 60
	span := tl.end.Sub(tl.start).Seconds()
	if span <= 0 {
		span = 1
	}
	x := func(t time.Time) float64 {
		return svgLeft + (svgWidth-svgLeft-svgRight)*t.Sub(tl.start).Seconds()/span
	}
	lane := func(replica string) int {
		return svgTop + svgLane*max(0, slices.Index(tl.replicas, replica))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	stale := len(tl.staleWrites())
	fmt.Fprintf(&b, `<text x="10" y="38">green: holds the Lease · blue tick: write the apiserver accepted · grey: refused · red: accepted while not holding the Lease (%d)</text>`+"\n", stale)
	for _, r := range tl.replicas {
		y := lane(r)
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+svgBar-4, html.EscapeString(r))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`+"\n", svgLeft, y+svgBar/2, svgWidth-svgRight, y+svgBar/2)
	}
	for _, h := range tl.holds {
		till := h.till
		if till.IsZero() {
			till = tl.end
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#8fd19e"><title>%s holds the Lease %s to %s</title></rect>`+"\n",
			x(h.from), lane(h.replica), max(1, x(till)-x(h.from)), svgBar, html.EscapeString(h.replica), clock(h.from), clock(till))
	}
	for _, wr := range tl.writes {
		color, top := "#1f6feb", lane(wr.replica)+svgBar
		switch {
		case wr.stale:
			color, top = "#d1242f", lane(wr.replica)-6
		case wr.code >= 300:
			color = "#999"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="%d"><title>%s %s: %s → %d</title></line>`+"\n",
			x(wr.at), top, x(wr.at), lane(wr.replica)+svgBar+svgTickHigh, color, map[bool]int{false: 1, true: 2}[wr.stale],
			clock(wr.at), html.EscapeString(wr.replica), html.EscapeString(wr.what), wr.code)
	}
	for i, m := range tl.marks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#444" stroke-dasharray="4 3"/>`+"\n",
			x(m.at), svgTop-12, x(m.at), height-40)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s %s</text>`+"\n", x(m.at)+3, svgTop-14-12*(i%2), m.signal, html.EscapeString(m.replica))
	}
	// The time axis, in seconds since the first holder.
	axis := height - 30
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>`+"\n", svgLeft, axis, svgWidth-svgRight, axis)
	step := max(1, int(span/20))
	for s := 0; s <= int(span); s += step {
		t := tl.start.Add(time.Duration(s) * time.Second)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#444"/><text x="%.1f" y="%d" text-anchor="middle">%ds</text>`+"\n",
			x(t), axis, x(t), axis+4, x(t), axis+18, s)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// clock prints a time of day to the millisecond.
func clock(t time.Time) string { return t.Format("15:04:05.000") }
