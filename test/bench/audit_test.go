package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

const (
	auditPodCreate = `{"stage":"ResponseComplete","verb":"create","user":{"username":"bench-mini-kcm"},"objectRef":{"resource":"pods","namespace":"bench"},"requestReceivedTimestamp":"2026-01-01T00:00:01.000000Z","stageTimestamp":"2026-01-01T00:00:01.100000Z"}`
	auditStatus    = `{"stage":"ResponseComplete","verb":"update","user":{"username":"bench-mini-kcm"},"objectRef":{"resource":"replicasets","subresource":"status"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z","stageTimestamp":"2026-01-01T00:00:02Z"}`
	auditWatch     = `{"stage":"ResponseStarted","verb":"watch","user":{"username":"bench-mini-kcm"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-01-01T00:00:00Z","stageTimestamp":"2026-01-01T00:00:00Z"}`
	auditWatchEnd  = `{"stage":"ResponseComplete","verb":"watch","user":{"username":"bench-mini-kcm"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-01-01T00:00:00Z","stageTimestamp":"2026-01-01T00:00:09Z"}`
	auditOtherUser = `{"stage":"ResponseComplete","verb":"create","user":{"username":"system:kube-scheduler"},"objectRef":{"resource":"pods","subresource":"binding"},"requestReceivedTimestamp":"2026-01-01T00:00:01Z","stageTimestamp":"2026-01-01T00:00:01Z"}`
	auditEvent     = `{"stage":"ResponseComplete","verb":"create","user":{"username":"bench-mini-kcm"},"objectRef":{"resource":"events"},"requestReceivedTimestamp":"2026-01-01T00:00:03Z","stageTimestamp":"2026-01-01T00:00:03.5Z"}`
)

func TestAuditCursorReturnsOnlyNewRequestsOfTheUser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	cursor := &auditCursor{path: path}

	// The watch counts once, when it starts; the last line is still being written.
	write(auditWatch + "\n" + auditPodCreate + "\n" + auditOtherUser + "\n" + auditStatus[:40])
	got, err := cursor.next("bench-mini-kcm")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Verb != "watch" || got[1].Verb != "create" || got[1].Resource != "pods" {
		t.Fatalf("first read = %+v, want the watch and the pod create", got)
	}

	write(auditStatus[40:] + "\n" + auditWatchEnd + "\n" + auditEvent + "\n")
	got, err = cursor.next("bench-mini-kcm")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Resource != "replicasets/status" || got[1].Resource != "events" {
		t.Fatalf("second read = %+v, want the finished status update and the event", got)
	}

	got, err = cursor.next("bench-mini-kcm")
	if err != nil || len(got) != 0 {
		t.Fatalf("third read = %+v, %v; want nothing new", got, err)
	}
}

func TestCountRequestsSplitsReadsAndWrites(t *testing.T) {
	c := countRequests([]request{
		{Verb: "watch", Resource: "pods"},
		{Verb: "list", Resource: "pods"},
		{Verb: "create", Resource: "pods"},
		{Verb: "create", Resource: "pods"},
		{Verb: "delete", Resource: "pods"},
		{Verb: "update", Resource: "replicasets/status"},
		{Verb: "patch", Resource: "events"},
	})
	if c.Reads != 2 || c.Writes != 5 || c.EventWrites != 1 {
		t.Errorf("reads %d writes %d event writes %d, want 2, 5, 1", c.Reads, c.Writes, c.EventWrites)
	}
	if c.ByVerbResource["create pods"] != 2 || c.ByVerbResource["update replicasets/status"] != 1 {
		t.Errorf("by verb and resource: %v", c.ByVerbResource)
	}
}

func TestCreationRateSpansFirstArrivalToLastCompletion(t *testing.T) {
	at := func(ms int) time.Time {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	pods, seconds := creationRate([]request{
		{Verb: "create", Resource: "pods", Received: at(500), Completed: at(600)},
		{Verb: "create", Resource: "pods", Received: at(0), Completed: at(2500)},
		{Verb: "create", Resource: "pods", Received: at(1000), Completed: at(2000)},
		{Verb: "update", Resource: "replicasets/status", Received: at(0), Completed: at(9000)},
		{Verb: "create", Resource: "events", Received: at(0), Completed: at(9000)},
	})
	if pods != 3 || seconds != 2.5 {
		t.Errorf("got %d pods in %vs, want 3 in 2.5s", pods, seconds)
	}
	if pods, _ := creationRate(nil); pods != 0 {
		t.Errorf("no requests: got %d pods", pods)
	}
}
