package endpoints

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/mini-kcm/mini-kcm/controllers/throttle"
)

// slowLimiter stands for a rate limit that makes a write wait: the world changes while
// it does.
type slowLimiter struct {
	flowcontrol.RateLimiter
	whileWaiting func()
}

func (l slowLimiter) Wait(context.Context) error {
	l.whileWaiting()
	return nil
}

func TestSyncWritesWhatChangedWhileItWaitedForTheRateLimit(t *testing.T) {
	const ns = metav1.NamespaceDefault
	f := newFixture(t, 0)
	f.addService(testService(ns))
	f.addPods(testPods(ns, 2, 0, 1, ipv4only)...)
	f.addEndpoints(&v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo", ResourceVersion: "1", Labels: managedLabels()}})
	waits := 0
	f.controller.limiter = &throttle.Limiter{RateLimiter: slowLimiter{whileWaiting: func() {
		waits++
		// A third pod becomes ready, and the first one not, while the write waits.
		f.addPods(testPod(ns, 2, 1, true, ipv4only))
		if err := f.pods.Update(testPod(ns, 0, 1, false, ipv4only)); err != nil {
			t.Fatal(err)
		}
	}}}

	f.mustSync(ns, "foo")
	if waits != 1 {
		t.Fatalf("the sync waited for %d tokens, want 1", waits)
	}
	written := f.stored(ns, "foo")
	want := []v1.EndpointSubset{{
		Addresses:         []v1.EndpointAddress{address(ns, 1), address(ns, 2)},
		NotReadyAddresses: []v1.EndpointAddress{address(ns, 0)},
		Ports:             []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}},
	}}
	if len(f.writes()) != 1 || !upToDate(written, want, testService(ns)) {
		t.Errorf("want one update with the pods as they were after the wait, got %v: %+v", describe(f.writes()), written.Subsets)
	}
}

func TestSyncThatNoLongerNeedsAWriteAfterTheWaitWritesNothing(t *testing.T) {
	const ns = metav1.NamespaceDefault
	f := newFixture(t, 0)
	f.addService(testService(ns))
	f.addEndpoints(&v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo", ResourceVersion: "1", Labels: managedLabels()}})
	f.addPods(testPod(ns, 0, 1, true, ipv4only))
	f.controller.limiter = &throttle.Limiter{RateLimiter: slowLimiter{whileWaiting: func() {
		// The pod that called for the write goes away before it is sent.
		if err := f.pods.Delete(testPod(ns, 0, 1, true, ipv4only)); err != nil {
			t.Fatal(err)
		}
	}}}
	f.mustSync(ns, "foo")
	f.noWrites()
}
