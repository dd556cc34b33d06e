package framework

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// TermSpan is one shard term's accepted writes to one namespace: its writer (the
// replica's user and the term its user agent names: "shard 3, epoch 2, term …"), its
// first and last write, and their count.
type TermSpan struct {
	Writer      string
	First, Last time.Time
	Writes      int
}

// IsReplicaWrite reports whether e is a write of one of the suite's replicas that the
// apiserver accepted, events aside.
func IsReplicaWrite(e controlplane.AuditEvent) bool {
	return e.Stage == "ResponseComplete" && e.ObjectRef != nil && strings.HasPrefix(e.By, "mini-kcm-replica-") &&
		e.Verb != "get" && e.Verb != "list" && e.Verb != "watch" && e.Code() < 300 && e.ObjectRef.Resource != "events"
}

// ShardTermSpans returns, per namespace of namespaces and writer, the span of the
// replicas' accepted writes in events. A write whose user agent names no shard term is
// an error of t.
func ShardTermSpans(t testing.TB, events []controlplane.AuditEvent, namespaces []string) map[string]map[string]*TermSpan {
	t.Helper()
	want := map[string]bool{}
	for _, ns := range namespaces {
		want[ns] = true
	}
	spans := map[string]map[string]*TermSpan{}
	for _, e := range events {
		if !IsReplicaWrite(e) || !want[e.ObjectRef.Namespace] {
			continue
		}
		term, ok := ParseShardTerm(e.UserAgent)
		if !ok {
			t.Errorf("a write without a shard term in its user agent: %s %s by %s (%s)", e.Verb, e.RequestURI, e.By, e.UserAgent)
			continue
		}
		ns, writer := e.ObjectRef.Namespace, term.key(e.By)
		if spans[ns] == nil {
			spans[ns] = map[string]*TermSpan{}
		}
		s := spans[ns][writer]
		if s == nil {
			s = &TermSpan{Writer: writer, First: e.RequestReceivedTimestamp}
			spans[ns][writer] = s
		}
		s.Last = e.RequestReceivedTimestamp
		s.Writes++
	}
	return spans
}

// AssertTermsDoNotOverlap checks that the spans of namespace ns's writers, in the order
// they began, never overlap: two replicas acting on one namespace at once would have
// overlapping ones. It logs the terms in order.
func AssertTermsDoNotOverlap(t testing.TB, ns string, spans map[string]*TermSpan) {
	t.Helper()
	var terms []*TermSpan
	for _, s := range spans {
		terms = append(terms, s)
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i].First.Before(terms[j].First) })
	var order []string
	for i, cur := range terms {
		order = append(order, fmt.Sprintf("%s (%d writes)", cur.Writer, cur.Writes))
		if i == 0 {
			continue
		}
		if prev := terms[i-1]; !cur.First.After(prev.Last) {
			t.Errorf("namespace %s: %s wrote from %s to %s while %s wrote from %s to %s", ns,
				prev.Writer, prev.First.Format(time.StampMilli), prev.Last.Format(time.StampMilli),
				cur.Writer, cur.First.Format(time.StampMilli), cur.Last.Format(time.StampMilli))
		}
	}
	t.Logf("namespace %s: terms in order: %s", ns, strings.Join(order, ", "))
}
