package framework

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// recorder is a testing.TB that keeps the errors a checker reports instead of failing
// the test, so that a checker can be shown to fail on a known-bad input.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Logf(string, ...any) {}

// auditEvent is one line of the apiserver's audit log: verb on resource in ns by user
// with agent as its user agent, answered code, received at second s of the test.
func auditEvent(t *testing.T, verb, resource, ns, user, agent string, code int32, s float64) controlplane.AuditEvent {
	t.Helper()
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
	line, err := json.Marshal(map[string]any{
		"stage": "ResponseComplete", "verb": verb, "requestURI": "/api/v1/namespaces/" + ns + "/" + resource,
		"user":                     map[string]any{"username": user},
		"userAgent":                agent,
		"objectRef":                map[string]any{"resource": resource, "namespace": ns},
		"responseStatus":           map[string]any{"code": code},
		"requestReceivedTimestamp": at, "stageTimestamp": at,
	})
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

const (
	termA = "mini-kcm/v0 (replicaset-controller; shard 1, epoch 2, term 100)"
	termB = "mini-kcm/v0 (replicaset-controller; shard 1, epoch 2, term 200)"
)

func TestShardTermSpansCountsOnlyTheReplicasAcceptedWrites(t *testing.T) {
	events := []controlplane.AuditEvent{
		auditEvent(t, "create", "pods", "t1", "mini-kcm-replica-1", termA, 201, 1),
		auditEvent(t, "update", "replicasets", "t1", "mini-kcm-replica-1", termA, 200, 2),
		// Not writes of a term: a read, a refused write, an event, another user, another
		// namespace.
		auditEvent(t, "get", "pods", "t1", "mini-kcm-replica-1", termA, 200, 3),
		auditEvent(t, "create", "pods", "t1", "mini-kcm-replica-1", termA, 403, 4),
		auditEvent(t, "create", "events", "t1", "mini-kcm-replica-1", termA, 201, 5),
		auditEvent(t, "create", "pods", "t1", "admin", termA, 201, 6),
		auditEvent(t, "create", "pods", "t9", "mini-kcm-replica-1", termA, 201, 7),
		auditEvent(t, "delete", "pods", "t1", "mini-kcm-replica-2", termB, 200, 8),
	}
	r := &recorder{TB: t}
	spans := ShardTermSpans(r, events, []string{"t1"})
	if len(r.errors) != 0 {
		t.Fatalf("errors %q", r.errors)
	}
	a := spans["t1"]["mini-kcm-replica-1 shard 1, epoch 2, term 100"]
	b := spans["t1"]["mini-kcm-replica-2 shard 1, epoch 2, term 200"]
	if len(spans) != 1 || len(spans["t1"]) != 2 || a == nil || b == nil || a.Writes != 2 || b.Writes != 1 ||
		a.Last.Sub(a.First) != time.Second {
		t.Errorf("spans %+v; want replica-1's term with 2 writes 1s apart and replica-2's with 1", spans["t1"])
	}

	// A replica's write that names no term is an error: it could not be judged.
	r = &recorder{TB: t}
	ShardTermSpans(r, []controlplane.AuditEvent{auditEvent(t, "create", "pods", "t1", "mini-kcm-replica-1", "mini-kcm/v0", 201, 1)}, []string{"t1"})
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "without a shard term") {
		t.Errorf("errors %q; want one naming the write without a term", r.errors)
	}
}

func TestAssertTermsDoNotOverlapFailsOnTwoWritersAtOnce(t *testing.T) {
	span := func(writer string, first, last float64) *TermSpan {
		base := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		return &TermSpan{Writer: writer, First: base.Add(time.Duration(first * float64(time.Second))),
			Last: base.Add(time.Duration(last * float64(time.Second))), Writes: 1}
	}
	for _, tc := range []struct {
		name    string
		spans   []*TermSpan
		overlap bool
	}{
		{"one after the other", []*TermSpan{span("a", 0, 5), span("b", 6, 9), span("c", 9.5, 12)}, false},
		{"the next starts before the last ends", []*TermSpan{span("a", 0, 5), span("b", 4, 9)}, true},
		{"one inside another", []*TermSpan{span("a", 0, 10), span("b", 2, 3), span("c", 11, 12)}, true},
		{"the same instant", []*TermSpan{span("a", 0, 5), span("b", 5, 9)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := map[string]*TermSpan{}
			for _, s := range tc.spans {
				spans[s.Writer] = s
			}
			r := &recorder{TB: t}
			AssertTermsDoNotOverlap(r, "t1", spans)
			if got := len(r.errors) > 0; got != tc.overlap {
				t.Errorf("reported %q; want an overlap reported: %v", r.errors, tc.overlap)
			}
		})
	}
}
