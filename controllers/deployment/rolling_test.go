package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestReconcileNewReplicaSetGrowsWithinSurgeAndShrinksToSpec(t *testing.T) {
	tests := []struct {
		name                string
		maxSurge            int32
		oldReplicas         int32
		newReplicas         int32
		wantScaled          bool
		expectedNewReplicas int32
	}{
		{"no surge, no room", 0, 10, 0, false, 0},
		{"surge room of 2", 2, 10, 0, true, 2},
		{"old already shrunk leaves more room", 2, 5, 0, true, 7},
		{"surge room used up", 2, 10, 2, false, 0},
		{"larger than spec shrinks to spec", 2, 2, 11, true, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", 10, intstr.FromInt32(tc.maxSurge), intstr.FromInt32(0))
			newRS := sizedRS("new", tc.newReplicas, 1, 10, 10)
			oldRS := sizedRS("old", tc.oldReplicas, 0, 10, 10)
			f := newFixture(t, newRS, oldRS)
			scaled, err := f.c.reconcileNewReplicaSet(f.ctx, []*appsv1.ReplicaSet{newRS, oldRS}, newRS, d)
			if err != nil {
				t.Fatal(err)
			}
			if scaled != tc.wantScaled {
				t.Fatalf("scaled = %v, want %v (writes %v)", scaled, tc.wantScaled, f.writes())
			}
			updated := f.updatedReplicaSets()
			if !tc.wantScaled {
				if len(updated) != 0 {
					t.Errorf("unexpected writes %v", f.writes())
				}
				return
			}
			if got := *updated["new"].Spec.Replicas; got != tc.expectedNewReplicas {
				t.Errorf("new = %d, want %d", got, tc.expectedNewReplicas)
			}
		})
	}
}

func TestReconcileOldReplicaSetsRespectsAvailability(t *testing.T) {
	tests := []struct {
		name                string
		maxUnavailable      int32
		oldReplicas         int32
		newReplicas         int32
		oldAvailable        int32
		newAvailable        int32
		wantScaled          bool
		expectedOldReplicas int32
	}{
		{"no unavailability allowed still resolves to one", 0, 10, 0, 10, 0, true, 9},
		{"two may be unavailable", 2, 10, 0, 10, 0, true, 8},
		{"unhealthy old pods go first", 2, 10, 0, 8, 0, true, 8},
		{"one unhealthy and one healthy go", 2, 10, 0, 9, 0, true, 8},
		{"unavailable new pods block further scale down", 2, 8, 2, 8, 0, false, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", 10, intstr.FromInt32(0), intstr.FromInt32(tc.maxUnavailable))
			newRS := sizedRS("new", tc.newReplicas, 1, 10, 10)
			newRS.Status.AvailableReplicas = tc.newAvailable
			oldRS := sizedRS("old", tc.oldReplicas, 0, 10, 10)
			oldRS.Status.AvailableReplicas = tc.oldAvailable
			f := newFixture(t, newRS, oldRS)
			scaled, err := f.c.reconcileOldReplicaSets(f.ctx, []*appsv1.ReplicaSet{oldRS, newRS}, []*appsv1.ReplicaSet{oldRS}, newRS, d)
			if err != nil {
				t.Fatal(err)
			}
			if scaled != tc.wantScaled {
				t.Fatalf("scaled = %v, want %v (writes %v)", scaled, tc.wantScaled, f.writes())
			}
			got := tc.oldReplicas
			if rs, ok := f.updatedReplicaSets()["old"]; ok {
				got = *rs.Spec.Replicas
			}
			if got != tc.expectedOldReplicas {
				t.Errorf("old = %d, want %d", got, tc.expectedOldReplicas)
			}
		})
	}
}

func TestCleanupUnhealthyReplicasRemovesOnlyUnavailablePods(t *testing.T) {
	tests := []struct {
		name      string
		available int32
		maxClean  int32
		want      int32
	}{
		{"limited by the budget", 8, 1, 1},
		{"limited by the unhealthy count", 8, 3, 2},
		{"no budget", 8, 0, 0},
		{"nothing unhealthy", 10, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", 10, intstr.FromInt32(2), intstr.FromInt32(2))
			oldRS := sizedRS("old", 10, 0, 10, 12)
			oldRS.Status.AvailableReplicas = tc.available
			f := newFixture(t, oldRS)
			_, cleaned, err := f.c.cleanupUnhealthyReplicas(f.ctx, []*appsv1.ReplicaSet{oldRS}, d, tc.maxClean)
			if err != nil {
				t.Fatal(err)
			}
			if cleaned != tc.want {
				t.Errorf("cleaned %d, want %d", cleaned, tc.want)
			}
		})
	}
}

func TestCleanupUnhealthyReplicasGoesOldestFirst(t *testing.T) {
	d := newDeployment("foo", 10, intstr.FromInt32(2), intstr.FromInt32(2))
	newer := sizedRS("newer", 5, 5, 10, 12)
	newer.Status.AvailableReplicas = 3
	older := sizedRS("older", 5, 0, 10, 12)
	older.Status.AvailableReplicas = 3
	f := newFixture(t, newer, older)
	oldRSs, cleaned, err := f.c.cleanupUnhealthyReplicas(f.ctx, []*appsv1.ReplicaSet{newer, older}, d, 3)
	if err != nil {
		t.Fatal(err)
	}
	updated := f.updatedReplicaSets()
	if cleaned != 3 || *updated["older"].Spec.Replicas != 3 || *updated["newer"].Spec.Replicas != 4 {
		t.Errorf("cleaned %d, older %v, newer %v", cleaned, updated["older"], updated["newer"])
	}
	if oldRSs[0].Name != "older" || *oldRSs[0].Spec.Replicas != 3 {
		t.Errorf("the returned list must be oldest first with updated sizes: %s=%d", oldRSs[0].Name, *oldRSs[0].Spec.Replicas)
	}
}

func TestCleanupUnhealthyReplicasRefusesToGrow(t *testing.T) {
	d := newDeployment("foo", 10, intstr.FromInt32(2), intstr.FromInt32(2))
	// More available than desired: the replica set is itself scaling down.
	oldRS := sizedRS("old", 3, 0, 10, 12)
	oldRS.Status.AvailableReplicas = 5
	f := newFixture(t, oldRS)
	if _, _, err := f.c.cleanupUnhealthyReplicas(f.ctx, []*appsv1.ReplicaSet{oldRS}, d, 4); err == nil {
		t.Error("want an error instead of scaling up")
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes = %v", w)
	}
}

func TestScaleDownOldReplicaSetsForRollingUpdate(t *testing.T) {
	tests := []struct {
		name                string
		maxUnavailable      int32
		available           int32
		oldReplicas         int32
		wantScaled          int32
		expectedOldReplicas int32
	}{
		{"one above minimum", 0, 10, 10, 1, 9},
		{"two above minimum", 2, 10, 10, 2, 8},
		{"at minimum", 2, 8, 10, 0, 10},
		{"nothing left to scale", 2, 10, 0, 0, 0},
		{"below minimum", 2, 1, 10, 0, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", 10, intstr.FromInt32(0), intstr.FromInt32(tc.maxUnavailable))
			oldRS := sizedRS("old", tc.oldReplicas, 0, 10, 10)
			oldRS.Status.AvailableReplicas = tc.available
			f := newFixture(t, oldRS)
			scaled, err := f.c.scaleDownOldReplicaSetsForRollingUpdate(f.ctx, []*appsv1.ReplicaSet{oldRS}, []*appsv1.ReplicaSet{oldRS}, d)
			if err != nil {
				t.Fatal(err)
			}
			if scaled != tc.wantScaled {
				t.Fatalf("scaled %d, want %d", scaled, tc.wantScaled)
			}
			got := tc.oldReplicas
			if rs, ok := f.updatedReplicaSets()["old"]; ok {
				got = *rs.Spec.Replicas
			}
			if got != tc.expectedOldReplicas {
				t.Errorf("old = %d, want %d", got, tc.expectedOldReplicas)
			}
		})
	}
}

// TestRollingUpdateStallsWhenNewPodsNeverBecomeAvailable walks the upstream example:
// 10 replicas, maxSurge 3, maxUnavailable 2, and new pods that never become ready.
// Sync 1 creates the new ReplicaSet at 3 and takes the old one from 10 to 8; sync 2
// grows the new one to 5; after that nothing moves, because 13 - 8 - 5 = 0.
func TestRollingUpdateStallsWhenNewPodsNeverBecomeAvailable(t *testing.T) {
	d := newDeployment("foo", 10, intstr.FromInt32(3), intstr.FromInt32(2))
	d.Spec.Template = podTemplate("v2")
	d.Annotations["deployment.kubernetes.io/revision"] = "1"
	oldRS := ownedRS(d, "v1", 10, 1, 0)
	f := newFixture(t, d, oldRS)

	// objects in the fake apiserver evolve; the cache is refreshed from it between syncs.
	refresh := func() *appsv1.Deployment {
		t.Helper()
		rsList, err := f.client.AppsV1().ReplicaSets("default").List(f.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rsList.Items {
			rs := &rsList.Items[i]
			// The new pods exist but never become available.
			rs.Status.Replicas = *rs.Spec.Replicas
			if rs.Name != oldRS.Name {
				rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 0, 0
			} else {
				rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = *rs.Spec.Replicas, *rs.Spec.Replicas
			}
			rs.Status.ObservedGeneration = 1
			f.addToCache(rs)
		}
		cur, err := f.client.AppsV1().Deployments("default").Get(f.ctx, "foo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f.addToCache(cur)
		return cur
	}
	sizes := func() (old, new int32) {
		t.Helper()
		rsList, _ := f.client.AppsV1().ReplicaSets("default").List(f.ctx, metav1.ListOptions{})
		for _, rs := range rsList.Items {
			if rs.Name == oldRS.Name {
				old = *rs.Spec.Replicas
			} else {
				new = *rs.Spec.Replicas
			}
		}
		return old, new
	}

	steps := []struct{ old, new int32 }{{8, 3}, {8, 5}, {8, 5}, {8, 5}}
	cur := d
	for i, want := range steps {
		if err := f.sync(cur); err != nil {
			t.Fatalf("sync %d: %v", i+1, err)
		}
		if old, new := sizes(); old != want.old || new != want.new {
			t.Fatalf("after sync %d: old %d new %d, want %d/%d", i+1, old, new, want.old, want.new)
		}
		cur = refresh()
	}
}
