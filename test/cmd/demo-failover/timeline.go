package main

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

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
	svgMargin   = 10 // around everything
	svgGap      = 12 // between the replicas' names and the plot, and between labels
	svgFont     = 12 // the labels' font size
	svgLine     = 16 // a row of text
	svgLane     = 46
	svgBar      = 18
	svgTickHigh = 14
)

// textWidth estimates the width of text in the drawing's sans-serif font at size px,
// erring wide: capitals and digits at 0.72 em, other characters at 0.6 em (DejaVu Sans
// and Helvetica stay below both). The layout only needs an upper bound.
func textWidth(text string, size float64) float64 {
	var w float64
	for _, r := range text {
		if unicode.IsUpper(r) || unicode.IsDigit(r) {
			w += 0.72 * size
		} else {
			w += 0.6 * size
		}
	}
	return w
}

// box is a rectangle of the drawing: a label's extent, or the drawing's own.
type box struct{ x, y, w, h float64 }

func (b box) overlaps(o box) bool {
	return b.x < o.x+o.w && o.x < b.x+b.w && b.y < o.y+o.h && o.y < b.y+b.h
}

func (b box) inside(o box) bool {
	return b.x >= o.x && b.y >= o.y && b.x+b.w <= o.x+o.w && b.y+b.h <= o.y+o.h
}

// label is a text placed by the layout; x is where its text starts (it is drawn with
// text-anchor start), y its baseline.
type label struct {
	text string
	x, y float64
	bold bool
}

// box returns the label's extent: from the baseline up by the font size, and a fifth
// of it down for descenders.
func (l label) box() box {
	size := float64(svgFont)
	if l.bold {
		size = 15
	}
	return box{x: l.x, y: l.y - size, w: textWidth(l.text, size), h: 1.2 * size}
}

// legendItem is one entry of the legend: a sample of what it explains, then its text.
type legendItem struct {
	kind string // "hold", "write", "refused", "stale" or "signal"
	text string
	// x, y is the sample's left end and the text's baseline; the text starts after
	// the sample.
	x, y float64
}

// legendSample is the width of a legend entry's sample and the gap after it.
const legendSample = 22

func (it legendItem) box() box {
	return box{x: it.x, y: it.y - svgFont, w: legendSample + textWidth(it.text, svgFont), h: 1.2 * svgFont}
}

// layout is where everything of a timeline's drawing goes. Each label has a box of
// its own: the signals' labels are staggered in rows above the plot so that none
// covers another, the legend sits below the time axis, and the margins are computed
// from the widest replica name and the labels that would cross the right edge.
type layout struct {
	width, height float64
	// plotLeft and plotRight bound the time axis.
	plotLeft, plotRight float64
	// marksTop is the top of the signals' label rows; lanesTop of the first replica's
	// lane; axis the time axis' y.
	marksTop, lanesTop, axis float64
	title                    label
	replicaNames             []label
	marks                    []label // one per tl.marks, in order
	ticks                    []label
	legend                   []legendItem
}

// lane returns the top of replica's lane.
func (l *layout) lane(tl *timeline, replica string) float64 {
	return l.lanesTop + svgLane*float64(max(0, slices.Index(tl.replicas, replica)))
}

// x maps a time to the plot.
func (l *layout) x(tl *timeline, t time.Time) float64 {
	span := tl.end.Sub(tl.start).Seconds()
	if span <= 0 {
		span = 1
	}
	return l.plotLeft + (l.plotRight-l.plotLeft)*t.Sub(tl.start).Seconds()/span
}

// labels returns every text of the drawing, for the checks of its tests.
func (l *layout) labels() []box {
	boxes := []box{l.title.box()}
	for _, group := range [][]label{l.replicaNames, l.marks, l.ticks} {
		for _, lb := range group {
			boxes = append(boxes, lb.box())
		}
	}
	for _, it := range l.legend {
		boxes = append(boxes, it.box())
	}
	return boxes
}

// tickStep is the spacing of the time axis' ticks in whole seconds, about 20 of them.
func tickStep(span float64) int { return max(1, int(span/20)) }

// markPlacement is where a signal's label goes: its row above the plot (0 is the top)
// and the x where its text starts.
type markPlacement struct {
	row int
	x   float64
}

// placeMarks places the labels of the signals whose dashed lines are at lineXs, of the
// given widths, between left and right. Each label goes just right of its line, or
// just left of it, in the first row where it covers no other label and no line that
// runs down through that row (a line starts at its own label's row and runs down to
// the axis), and never across the left or right bound. Where that is impossible it
// still covers no other label, only a line. It tries the signals in time order and in
// reverse and keeps the placement that crosses fewer lines, then uses fewer rows.
func placeMarks(lineXs, widths []float64, left, right float64) ([]markPlacement, int) {
	order := make([]int, len(lineXs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(lineXs[a], lineXs[b]) })
	best, bestRows, bestCrossed := placeMarksInOrder(lineXs, widths, left, right, order)
	slices.Reverse(order)
	if p, rows, crossed := placeMarksInOrder(lineXs, widths, left, right, order); crossed < bestCrossed ||
		crossed == bestCrossed && rows < bestRows {
		best, bestRows = p, rows
	}
	return best, bestRows
}

func placeMarksInOrder(lineXs, widths []float64, left, right float64, order []int) ([]markPlacement, int, int) {
	placed := make([]markPlacement, len(lineXs))
	var done []int
	rows, crossed := 0, 0
	covers := func(from, width, at float64) bool { return at >= from-2 && at <= from+width+2 }
	fits := func(i, row int, x float64, linesToo bool) bool {
		if x < left || x+widths[i] > right {
			return false
		}
		for _, j := range done {
			p := placed[j]
			switch {
			case p.row == row && x-svgGap/2 < p.x+widths[j] && p.x < x+widths[i]+svgGap/2:
				return false // the labels would overlap
			case linesToo && p.row < row && covers(x, widths[i], lineXs[j]):
				return false // an earlier signal's line would cross this label
			case linesToo && p.row > row && covers(p.x, widths[j], lineXs[i]):
				return false // this signal's line would cross an earlier label
			}
		}
		return true
	}
	for _, i := range order {
		candidates := []float64{lineXs[i] + 3, lineXs[i] - 3 - widths[i]}
		if lineXs[i]+3+widths[i] > right && lineXs[i]-3-widths[i] < left {
			candidates = append(candidates, max(left, right-widths[i]))
		}
		found := false
		for _, linesToo := range []bool{true, false} {
			for row := 0; row <= rows && !found; row++ {
				for _, x := range candidates {
					if fits(i, row, x, linesToo) {
						placed[i], found = markPlacement{row: row, x: x}, true
						if !linesToo {
							crossed++
						}
						break
					}
				}
			}
			if found {
				break
			}
		}
		if !found {
			// Wider than the drawing: alone in a new row, from the left.
			placed[i] = markPlacement{row: rows, x: left}
			crossed++
		}
		rows = max(rows, placed[i].row+1)
		done = append(done, i)
	}
	return placed, rows, crossed
}

// layOut places the title, the replicas' names, the signals' labels, the time axis and
// the legend.
func (tl *timeline) layOut(title, legendStale string) *layout {
	l := &layout{width: svgWidth}
	l.title = label{text: title, x: svgMargin, y: svgMargin + 15, bold: true}

	// The left margin fits the widest replica name, the right one half the last tick's
	// label, which is centred on its tick.
	names := 0.0
	for _, r := range tl.replicas {
		names = max(names, textWidth(r, svgFont))
	}
	l.plotLeft = svgMargin + names + svgGap
	span := tl.end.Sub(tl.start).Seconds()
	step := tickStep(span)
	lastTick := fmt.Sprintf("%ds", max(0, int(span))/step*step)
	l.width = max(l.width, l.plotLeft+400) // a plot even beside very long names
	l.plotRight = l.width - svgMargin - textWidth(lastTick, svgFont)/2

	// The signals' labels, in rows above the plot; see placeMarks.
	l.marksTop = l.title.box().y + l.title.box().h + svgGap/2
	lineXs := make([]float64, len(tl.marks))
	widths := make([]float64, len(tl.marks))
	for i, m := range tl.marks {
		lineXs[i], widths[i] = l.x(tl, m.at), textWidth(m.signal+" "+m.replica, svgFont)
	}
	placements, rows := placeMarks(lineXs, widths, svgMargin, l.width-svgMargin)
	l.marks = make([]label, len(tl.marks))
	for i, m := range tl.marks {
		l.marks[i] = label{text: m.signal + " " + m.replica, x: placements[i].x, y: l.marksTop + svgLine*float64(placements[i].row+1) - 4}
	}
	l.lanesTop = l.marksTop + svgLine*float64(rows) + svgGap
	for i, r := range tl.replicas {
		top := l.lanesTop + svgLane*float64(i)
		l.replicaNames = append(l.replicaNames, label{text: r, x: svgMargin, y: top + svgBar - 4})
	}

	// The time axis, in seconds since the start.
	l.axis = l.lanesTop + svgLane*float64(len(tl.replicas))
	for s := 0; float64(s) <= span; s += step {
		text := fmt.Sprintf("%ds", s)
		x := l.x(tl, tl.start.Add(time.Duration(s)*time.Second))
		l.ticks = append(l.ticks, label{text: text, x: x - textWidth(text, svgFont)/2, y: l.axis + 18})
	}

	// The legend, below the axis, wrapped at the drawing's width.
	y := l.axis + 18 + svgLine + 8
	x := float64(svgMargin)
	for _, it := range []legendItem{
		{kind: "hold", text: "holds the Lease"},
		{kind: "write", text: "write the apiserver accepted"},
		{kind: "refused", text: "write it refused"},
		{kind: "stale", text: legendStale},
		{kind: "signal", text: "signal sent"},
	} {
		w := it.box().w
		if x > svgMargin && x+w > l.width-svgMargin {
			x, y = svgMargin, y+svgLine+4
		}
		it.x, it.y = x, y
		l.legend = append(l.legend, it)
		x += w + 2*svgGap
	}
	l.height = math.Ceil(y + 0.2*svgFont + svgMargin)
	return l
}

// writeSVG draws the timeline: one lane per replica, the Lease held as a green bar,
// each accepted write as a blue tick (red and taller when the replica did not hold the
// Lease), each refused write as a grey tick, the signals as dashed lines with their
// labels staggered above the plot, and the legend below the time axis.
func (tl *timeline) writeSVG(w io.Writer, title string) error {
	stale := fmt.Sprintf("accepted while not holding the Lease (%d)", len(tl.staleWrites()))
	l := tl.layOut(title, stale)
	x := func(t time.Time) float64 { return l.x(tl, t) }
	lane := func(replica string) float64 { return l.lane(tl, replica) }
	text := func(b *strings.Builder, lb label) {
		weight := ""
		if lb.bold {
			weight = ` font-size="15" font-weight="bold"`
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f"%s>%s</text>`+"\n", lb.x, lb.y, weight, html.EscapeString(lb.text))
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="%d">`+"\n",
		l.width, l.height, l.width, l.height, svgFont)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	text(&b, l.title)
	for i, r := range tl.replicas {
		text(&b, l.replicaNames[i])
		y := lane(r) + svgBar/2
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", l.plotLeft, y, l.plotRight, y)
	}
	for _, h := range tl.holds {
		till := h.till
		if till.IsZero() {
			till = tl.end
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#8fd19e"><title>%s holds the Lease %s to %s</title></rect>`+"\n",
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
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%d"><title>%s %s: %s → %d</title></line>`+"\n",
			x(wr.at), top, x(wr.at), lane(wr.replica)+svgBar+svgTickHigh, color, map[bool]int{false: 1, true: 2}[wr.stale],
			clock(wr.at), html.EscapeString(wr.replica), html.EscapeString(wr.what), wr.code)
	}
	for i, m := range tl.marks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="4 3"/>`+"\n",
			x(m.at), l.marks[i].y-svgFont+2, x(m.at), l.axis)
		text(&b, l.marks[i])
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", l.plotLeft, l.axis, l.plotRight, l.axis)
	for _, tick := range l.ticks {
		center := tick.x + textWidth(tick.text, svgFont)/2
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", center, l.axis, center, l.axis+4)
		text(&b, tick)
	}
	for _, it := range l.legend {
		mid := it.y - svgFont/3
		switch it.kind {
		case "hold":
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="16" height="10" fill="#8fd19e"/>`+"\n", it.x, mid-5)
		case "write", "refused", "stale":
			color := map[string]string{"write": "#1f6feb", "refused": "#999", "stale": "#d1242f"}[it.kind]
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", it.x+8, mid-7, it.x+8, mid+7, color)
		case "signal":
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="4 3"/>`+"\n", it.x+8, mid-7, it.x+8, mid+7)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", it.x+legendSample, it.y, html.EscapeString(it.text))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// clock prints a time of day to the millisecond.
func clock(t time.Time) string { return t.Format("15:04:05.000") }
