package replicaset

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// storeAt is an informer store that has seen resourceVersion rv.
type storeAt struct{ rv string }

func (s *storeAt) LastStoreSyncResourceVersion() string { return s.rv }

func TestConsistencyGuardHoldsSyncsUntilTheCacheSeesOurWrites(t *testing.T) {
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	tests := []struct {
		name      string
		writes    map[schema.GroupResource]string
		podsRV    string
		rsRV      string
		wantStale bool
	}{
		{"no writes", nil, "5", "5", false},
		{"pod write seen", map[schema.GroupResource]string{podsResource: "7"}, "7", "1", false},
		{"pod write not yet seen", map[schema.GroupResource]string{podsResource: "8"}, "7", "9", true},
		{"status write not yet seen", map[schema.GroupResource]string{replicaSetsResource: "12"}, "20", "10", true},
		{"store cannot tell its version", map[schema.GroupResource]string{podsResource: "8"}, "", "", false},
		{"unparsable version never blocks", map[schema.GroupResource]string{podsResource: "abc"}, "7", "7", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newConsistencyGuard(map[schema.GroupResource]resourceVersionReader{
				podsResource:        &storeAt{tt.podsRV},
				replicaSetsResource: &storeAt{tt.rsRV},
			})
			for resource, rv := range tt.writes {
				g.WroteAt(web, "uid", resource, rv)
			}
			err := g.EnsureReady(web)
			var stale *staleCacheError
			if got := errors.As(err, &stale); got != tt.wantStale {
				t.Fatalf("EnsureReady = %v, want stale %v", err, tt.wantStale)
			}
			if !tt.wantStale {
				if _, kept := g.written[web]; kept {
					t.Error("a caught-up record must be dropped")
				}
			}
		})
	}
}

func TestConsistencyGuardKeepsTheNewestWriteAndTheCurrentIncarnation(t *testing.T) {
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	pods := &storeAt{"10"}
	g := newConsistencyGuard(map[schema.GroupResource]resourceVersionReader{podsResource: pods})

	g.WroteAt(web, "uid-1", podsResource, "12")
	g.WroteAt(web, "uid-1", podsResource, "11") // an older write finishing late
	pods.rv = "11"
	if err := g.EnsureReady(web); err == nil {
		t.Fatal("the newest write (12) is not seen yet")
	}

	// Deleting the old incarnation's record by UID must not drop a newer one's.
	g.WroteAt(web, "uid-2", podsResource, "15")
	g.Clear(web, "uid-1")
	if err := g.EnsureReady(web); err == nil {
		t.Fatal("the new incarnation's write was forgotten")
	}
	g.Clear(web, "uid-2")
	if err := g.EnsureReady(web); err != nil {
		t.Fatalf("cleared record still blocks: %v", err)
	}

	g.WroteAt(web, "uid-3", podsResource, "30")
	g.Clear(web, "")
	if err := g.EnsureReady(web); err != nil {
		t.Fatalf("a clear without UID must drop any record: %v", err)
	}
}

func TestPodWritesAreRecordedAgainstTheirOwner(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs)
	pod := newPod("pod", rs, true)
	pod.ResourceVersion = "42"
	f.c.podWritten(pod, nil) // released pods have no owner to wait for
	if len(f.c.consistency.written) != 0 {
		t.Fatal("a pod without controller was recorded")
	}
	f.c.podWritten(pod, &pod.OwnerReferences[0])
	w := f.c.consistency.written[types.NamespacedName{Namespace: "default", Name: "web"}]
	if w == nil || w.uid != rs.UID || w.versions[podsResource] != "42" {
		t.Fatalf("record %+v, want resourceVersion 42 for the ReplicaSet's UID", w)
	}
}
