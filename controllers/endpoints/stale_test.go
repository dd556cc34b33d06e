package endpoints

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStaleEndpointsTracker(t *testing.T) {
	at := func(rv string) *v1.Endpoints {
		return &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foo", ResourceVersion: rv}}
	}
	tracker := newStaleEndpointsTracker()
	if tracker.isStale(at("1")) {
		t.Error("an Endpoints never replaced is stale")
	}

	tracker.markStale(at("1"))
	if !tracker.isStale(at("1")) {
		t.Error("the replaced version is not stale")
	}
	if tracker.isStale(at("2")) {
		t.Error("a newer version is stale")
	}
	other := at("1")
	other.Name = "bar"
	if tracker.isStale(other) {
		t.Error("another Endpoints at the same version is stale")
	}

	tracker.forget("ns", "foo")
	if tracker.isStale(at("1")) {
		t.Error("a forgotten Endpoints is still stale")
	}
}
