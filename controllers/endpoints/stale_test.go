package endpoints

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func at(name, rv string) *v1.Endpoints {
	return &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func TestStaleEndpointsTrackerKnowsTheReplacedVersion(t *testing.T) {
	tracker := newStaleEndpointsTracker()
	if got := tracker.check(at("foo", "1")); got != cacheCurrent {
		t.Errorf("an Endpoints never replaced: %v, want current", got)
	}

	tracker.markStale(at("foo", "1"))
	if got := tracker.check(at("foo", "2")); got != cacheCurrent {
		t.Errorf("a newer version: %v, want current", got)
	}
	if got := tracker.check(at("bar", "1")); got != cacheCurrent {
		t.Errorf("another Endpoints at the same version: %v, want current", got)
	}
	if got := tracker.check(at("foo", "1")); got != cacheBehind {
		t.Errorf("the replaced version: %v, want behind", got)
	}

	tracker.forget("ns", "foo")
	if got := tracker.check(at("foo", "1")); got != cacheCurrent {
		t.Errorf("a forgotten Endpoints: %v, want current", got)
	}
}

func TestStaleEndpointsTrackerResumesOnlyAWaitingSync(t *testing.T) {
	tracker := newStaleEndpointsTracker()
	tracker.markStale(at("foo", "1"))
	if tracker.cacheMovedPast(at("foo", "1")) {
		t.Error("the cache moving on resumed a sync although none waited")
	}

	tracker.markStale(at("foo", "2"))
	if got := tracker.check(at("foo", "2")); got != cacheBehind {
		t.Fatalf("the replaced version: %v, want behind", got)
	}
	if tracker.cacheMovedPast(at("foo", "1")) {
		t.Error("an older version leaving the cache resumed the sync")
	}
	if tracker.cacheMovedPast(at("bar", "2")) {
		t.Error("another Endpoints leaving that version resumed the sync")
	}
	if !tracker.cacheMovedPast(at("foo", "2")) {
		t.Error("the cache moving past the replaced version did not resume the waiting sync")
	}
	if tracker.cacheMovedPast(at("foo", "2")) {
		t.Error("the same version resumed the sync twice")
	}
}

// TestStaleEndpointsTrackerCatchesAnUpdateBetweenReadAndCheck covers a sync that read the
// replaced version just before the cache moved past it: were it to wait, no event
// would ever resume it, and were it to go on, it would diff against the old version.
func TestStaleEndpointsTrackerCatchesAnUpdateBetweenReadAndCheck(t *testing.T) {
	tracker := newStaleEndpointsTracker()
	tracker.markStale(at("foo", "1"))
	read := at("foo", "1")
	tracker.cacheMovedPast(at("foo", "1"))
	if got := tracker.check(read); got != cachePassed {
		t.Errorf("the replaced version read before the cache moved on: %v, want passed (read again)", got)
	}
}

func TestOnEndpointsUpdateQueuesAWaitingServiceOnceTheCacheMovesOn(t *testing.T) {
	f := newFixture(t, 0)
	f.controller.staleEndpoints.markStale(at("foo", "1"))
	f.controller.staleEndpoints.check(at("foo", "1"))

	f.controller.onEndpointsUpdate(at("foo", "1"), at("foo", "1"))
	if got := drain(f.controller); len(got) != 0 {
		t.Fatalf("a resync queued %v", got)
	}
	f.controller.onEndpointsUpdate(at("foo", "1"), at("foo", "2"))
	if got := drain(f.controller); len(got) != 1 || got[0] != "ns/foo" {
		t.Fatalf("the cache moving on queued %v, want ns/foo", got)
	}
	f.controller.onEndpointsUpdate(at("foo", "2"), at("foo", "3"))
	if got := drain(f.controller); len(got) != 0 {
		t.Errorf("an update nobody waited for queued %v", got)
	}
}
