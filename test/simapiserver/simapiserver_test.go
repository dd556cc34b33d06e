package simapiserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// The simulators judge the product by this apiserver, so it must keep the real one's
// rules: each test below is one of them.

func lease(name string, labels map[string]string, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
}

func client(a *Server, replica string) *Leases {
	return a.LeaseClient(NewLink(replica, &Stall{}, 1, 2, 0, 0, 0), time.Second)
}

func TestUpdatesAndDeletesOnAStaleResourceVersionConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		a := New()
		c := client(a, "r0")
		created, err := c.Create(ctx, lease("l", nil, "r0"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(ctx, lease("l", nil, "r1"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("a second create: %v, want AlreadyExists", err)
		}
		updated, err := c.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("an update on resourceVersion %s after %s: %v, want a conflict", created.ResourceVersion, updated.ResourceVersion, err)
		}
		stale := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &created.ResourceVersion}}
		if err := c.Delete(ctx, "l", stale); !apierrors.IsConflict(err) {
			t.Errorf("a delete on a stale resourceVersion: %v, want a conflict", err)
		}
		if err := c.Delete(ctx, "l", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "l", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a get after the delete: %v, want NotFound", err)
		}
		var verbs []string
		for _, h := range a.History() {
			verbs = append(verbs, h.Verb)
		}
		if got, want := strings.Join(verbs, " "), "created updated deleted"; got != want {
			t.Errorf("history %q, want %q", got, want)
		}
	})
}

// A watch by label sees a Lease leave its selection as a delete and come back as an
// add, and one that resumes from a resourceVersion gets what happened after it.
func TestAWatchFollowsItsSelectionFromAResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		a := New()
		c := client(a, "r0")
		in, out := map[string]string{"set": "a"}, map[string]string{"set": "b"}
		l, err := c.Create(ctx, lease("l", in, "r0"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		from := l.ResourceVersion
		if _, err := c.Create(ctx, lease("other", out, "r0"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		l.Labels = out
		if l, err = c.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		l.Labels = in
		if _, err = c.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, "l", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: "set=a", ResourceVersion: from})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		want := []watch.EventType{watch.Deleted, watch.Added, watch.Deleted}
		for i, typ := range want {
			select {
			case e := <-w.ResultChan():
				if e.Type != typ || e.Object.(*coordinationv1.Lease).Name != "l" {
					t.Fatalf("event %d: %s of %s, want %s of l", i, e.Type, e.Object.(*coordinationv1.Lease).Name, typ)
				}
			case <-time.After(time.Minute):
				t.Fatalf("event %d: none, want %s", i, typ)
			}
		}
		byName, err := c.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=other"})
		if err != nil || len(byName.Items) != 1 {
			t.Errorf("list by name: %v, %v; want the one Lease", byName, err)
		}
	})
}

// A call the client gave up on while the apiserver stalled is still applied when the
// stall ends: a write of unknown outcome, which the history shows and the client does
// not know of.
func TestACallGivenUpOnDuringAStallIsAppliedAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		a := New()
		c := client(a, "r0")
		a.Stall(true)
		if _, err := c.Create(ctx, lease("l", nil, "r0"), metav1.CreateOptions{}); !errors.Is(err, ErrTimeout) {
			t.Errorf("a create during a stall: %v, want the request timeout", err)
		}
		if len(a.History()) != 0 {
			t.Fatal("applied during the stall")
		}
		a.Stall(false)
		a.Wait()
		if h := a.History(); len(h) != 1 || h[0].Record.HolderIdentity != "r0" {
			t.Errorf("history after the stall %+v, want the create", h)
		}
	})
}

// Replay shows each controller write with the Leases as they were when it was applied.
func TestReplayShowsTheLeasesAtEachWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		a := New()
		c := client(a, "r0")
		rt := a.ControllerTransport(NewLink("r0", &Stall{}, 1, 3, 0, 0, 0))
		write := func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, "https://sim/api/v1/namespaces/tenant/configmaps/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		write()
		l, err := c.Create(ctx, lease("l", nil, "r0"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		write()
		l.Spec.HolderIdentity = nil
		if _, err := c.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		write()
		var holders []string
		leaseWrites := 0
		a.Replay(func(LeaseWrite) { leaseWrites++ }, func(w Write, leases map[string]*coordinationv1.Lease) {
			if w.Namespace != "tenant" || w.By != "r0" {
				t.Errorf("write %+v, want r0's to tenant", w)
			}
			holder := "none"
			if l := leases["l"]; l != nil {
				holder = ptr.Deref(l.Spec.HolderIdentity, "")
			}
			holders = append(holders, holder)
		})
		if got, want := strings.Join(holders, ","), "none,r0,"; got != want || leaseWrites != 2 {
			t.Errorf("holders at each write %q and %d Lease writes, want %q and 2", got, leaseWrites, want)
		}
	})
}
