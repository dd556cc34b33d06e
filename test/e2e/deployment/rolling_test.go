package deployment

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// rollingBounds are the limits a rolling update must keep.
type rollingBounds struct {
	replicas, maxSurge, maxUnavailable int32
}

// rolloutExtremes are the worst values the samples of a rollout saw.
type rolloutExtremes struct {
	samples                int
	maxActivePods          int
	maxPodsWithTerminating int
	minAvailablePods       int
	maxSpecSum             int32
	minStatusAvailable     int32
	minDeploymentAvailable int32
}

func newRolloutExtremes() rolloutExtremes {
	return rolloutExtremes{minAvailablePods: 1 << 30, minStatusAvailable: 1 << 30, minDeploymentAvailable: 1 << 30}
}

// checkRollingBounds checks one snapshot of a rolling update against the limits and
// records the extremes.
//
// What is counted, and why:
//
//   - Upstream's own invariant (test/utils/deployment.go checkRollingUpdateStatus,
//     used by its e2e and integration tests) is on intent and status: the sum of
//     spec.replicas over the Deployment's ReplicaSets never exceeds replicas +
//     maxSurge, and the Deployment's status.availableReplicas never drops below
//     replicas - maxUnavailable. Both are checked as is.
//   - Pods are checked too. A pod counts towards the surge when it is active: not
//     finished and not terminating. Terminating pods are left out on purpose, as
//     upstream does: with the default pod replacement policy (TerminationStarted;
//     the DeploymentPodReplacementPolicy gate is off in v1.37) a ReplicaSet replaces a
//     pod as soon as its deletion starts, and status.replicas, which the Deployment
//     controller sums, excludes terminating pods (they are reported separately in
//     status.terminatingReplicas). So active + terminating may legitimately exceed the
//     surge for as long as a kubelet takes to stop a container; the suite logs that
//     number but does not bound it.
//   - A pod counts as available when it is active and has been Ready for
//     minReadySeconds by its Ready condition's lastTransitionTime, the definition the
//     controllers themselves apply. Availability is the one place a rollout can hurt
//     users, and it holds at the pod level too: the Deployment controller only scales
//     an old ReplicaSet down by what the new one has already made available
//     (reconcileOldReplicaSets' maxScaledDown), and KWOK pods never lose readiness.
//
// The pod-level surge bound leans on ordering rather than on arithmetic alone: when
// an old ReplicaSet is scaled down, its pods stay active until the ReplicaSet
// controller deletes them, and the Deployment controller may already have grown the
// new ReplicaSet into that room. The deletes are issued on the very event that scaled
// the old ReplicaSet down, while the new pods need two more API round trips (the
// Deployment's status write, then the new ReplicaSet's update) before the ReplicaSet
// controller creates them; no run, of mini-kcm or of kube-controller-manager, has
// seen the creates overtake the deletes. Should it ever happen, the failure message
// lists active pods against spec per ReplicaSet, which tells a slow delete from an
// over-eager scale-up.
func checkRollingBounds(s snapshot, b rollingBounds, ext *rolloutExtremes) error {
	pods := countPods(s.pods, s.d.Spec.MinReadySeconds, s.at)
	var specSum, statusAvailable int32
	for _, rs := range s.rsList {
		specSum += *rs.Spec.Replicas
		statusAvailable += rs.Status.AvailableReplicas
	}
	ext.samples++
	ext.maxActivePods = max(ext.maxActivePods, pods.active)
	ext.maxPodsWithTerminating = max(ext.maxPodsWithTerminating, pods.active+pods.terminating)
	ext.minAvailablePods = min(ext.minAvailablePods, pods.available)
	ext.maxSpecSum = max(ext.maxSpecSum, specSum)
	ext.minStatusAvailable = min(ext.minStatusAvailable, statusAvailable)
	ext.minDeploymentAvailable = min(ext.minDeploymentAvailable, s.d.Status.AvailableReplicas)

	maxTotal, minAvailable := b.replicas+b.maxSurge, b.replicas-b.maxUnavailable
	var problems []string
	if specSum > maxTotal {
		problems = append(problems, fmt.Sprintf("replica sets want %d pods in total, more than replicas + maxSurge = %d", specSum, maxTotal))
	}
	if s.d.Status.AvailableReplicas < minAvailable {
		problems = append(problems, fmt.Sprintf("deployment status reports %d available, fewer than replicas - maxUnavailable = %d", s.d.Status.AvailableReplicas, minAvailable))
	}
	if pods.active > int(maxTotal) {
		problems = append(problems, fmt.Sprintf("%d active pods, more than replicas + maxSurge = %d (%s)", pods.active, maxTotal, podsBeyondSpec(s)))
	}
	if pods.available < int(minAvailable) {
		problems = append(problems, fmt.Sprintf("%d available pods, fewer than replicas - maxUnavailable = %d", pods.available, minAvailable))
	}
	if len(problems) > 0 {
		return fmt.Errorf("at %s: %s", s.at.Format(time.StampMilli), strings.Join(problems, "; "))
	}
	return nil
}

// podsBeyondSpec says, per ReplicaSet, how many active pods it has against its spec.
func podsBeyondSpec(s snapshot) string {
	active := map[string]int{}
	for i := range s.pods {
		pod := &s.pods[i]
		if pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			active[pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]]++
		}
	}
	var parts []string
	for _, rs := range s.rsList {
		parts = append(parts, fmt.Sprintf("%s: %d active pods for spec %d", rs.Name, active[rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]], *rs.Spec.Replicas))
	}
	return strings.Join(parts, ", ")
}

// A rolling update to a new image never runs more than replicas + maxSurge pods nor
// fewer than replicas - maxUnavailable available ones, checked every ~100ms through
// the whole rollout; it ends at revision 2 with the old ReplicaSet kept at 0 (upstream
// TestDeploymentRollingUpdate and e2e testRollingUpdateDeployment).
func TestRollingUpdateStaysWithinMaxSurgeAndMaxUnavailable(t *testing.T) {
	tests := []struct {
		name     string
		strategy *appsv1.RollingUpdateDeployment
		bounds   rollingBounds
		// firstSteps are the events of the rollout's first steps, which the
		// arithmetic fixes; %[1]s is the old ReplicaSet, %[2]s the new one.
		firstSteps []string
		// holdOldPods keeps the old pods Terminating until the rollout is over.
		holdOldPods bool
	}{
		{
			// The 25% defaults resolve against 10 replicas as upstream's
			// ResolveFenceposts does: the surge rounds up (3), the unavailability
			// rounds down (2). The new ReplicaSet starts at min(maxSurge, replicas) = 3;
			// with none of its pods available the old one may lose only
			// 13 - 8 - 3 = 2 (the example in upstream's rolling.go).
			name:       "default 25 percent each",
			bounds:     rollingBounds{replicas: 10, maxSurge: 3, maxUnavailable: 2},
			firstSteps: []string{"Scaled up replica set %[2]s from 0 to 3", "Scaled down replica set %[1]s from 10 to 8"},
		},
		{
			// No pod may be unavailable: old pods go only as new ones become available.
			name:       "surge only",
			strategy:   &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(2)), MaxUnavailable: ptr.To(intstr.FromInt32(0))},
			bounds:     rollingBounds{replicas: 10, maxSurge: 2, maxUnavailable: 0},
			firstSteps: []string{"Scaled up replica set %[2]s from 0 to 2"},
		},
		{
			// No surge: the new ReplicaSet is created empty (no event), the old one
			// makes room first, and the new one takes exactly that room.
			name:       "unavailability only",
			strategy:   &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(3))},
			bounds:     rollingBounds{replicas: 10, maxSurge: 0, maxUnavailable: 3},
			firstSteps: []string{"Scaled down replica set %[1]s from 10 to 7", "Scaled up replica set %[2]s from 0 to 3"},
		},
		{
			// A full surge starts every new pod at once, and nothing old goes before
			// the new pods are available.
			name:       "full surge",
			strategy:   &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("100%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))},
			bounds:     rollingBounds{replicas: 10, maxSurge: 10, maxUnavailable: 0},
			firstSteps: []string{"Scaled up replica set %[2]s from 0 to 10"},
		},
		{
			// Old pods that take long to stop do not hold the rollout back: a pod
			// being deleted no longer counts, and is replaced at once. Pods and
			// terminating pods together then exceed the surge, which is upstream's
			// behaviour with the default pod replacement policy.
			name:        "old pods slow to terminate",
			bounds:      rollingBounds{replicas: 10, maxSurge: 3, maxUnavailable: 2},
			firstSteps:  []string{"Scaled up replica set %[2]s from 0 to 3", "Scaled down replica set %[1]s from 10 to 8"},
			holdOldPods: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startControllers(t)
			d := newDeployment("web", tt.bounds.replicas)
			d.Spec.Strategy.RollingUpdate = tt.strategy
			// A pod counts as available one second after it is Ready, so the rollout
			// takes several steps that the samples can see, instead of finishing
			// between two of them.
			d.Spec.MinReadySeconds = 1
			if tt.holdOldPods {
				d.Spec.Template.Finalizers = []string{holdFinalizer}
				t.Cleanup(func() { releaseHeldPods(t, f.Client, f.Namespace) })
			}
			web := createDeployment(t, f, d)
			_, oldRS := web.waitForRollout("1", image(1))

			web.update(func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Image = image(2)
				d.Spec.Template.Finalizers = nil
			})
			ext := newRolloutExtremes()
			var newRS *appsv1.ReplicaSet
			web.eventually(rolloutTimeout, "rollout to revision 2 within maxSurge and maxUnavailable", func() error {
				s, err := web.snapshot()
				if err != nil {
					return err
				}
				if err := checkRollingBounds(s, tt.bounds, &ext); err != nil {
					t.Fatalf("rolling update broke its bounds: %v\n%s", err, web.describe())
				}
				newRS, err = s.complete("2", image(2))
				return err
			})
			t.Logf("%d samples: at most %d active pods (%d with terminating ones) and %d in replica set specs; at least %d available pods, %d available by replica set status, %d by deployment status",
				ext.samples, ext.maxActivePods, ext.maxPodsWithTerminating, ext.maxSpecSum, ext.minAvailablePods, ext.minStatusAvailable, ext.minDeploymentAvailable)

			rsList := web.mustReplicaSets()
			if len(rsList) != 2 || rsList[0].Name != oldRS.Name || rsList[1].Name != newRS.Name {
				t.Fatalf("want the old replica set %s and the new one %s\n%s", oldRS.Name, newRS.Name, web.describe())
			}
			// Both were last sized by the Deployment controller.
			maxReplicas := fmt.Sprint(tt.bounds.replicas + tt.bounds.maxSurge)
			for rs, revision := range map[*appsv1.ReplicaSet]string{rsList[0]: "1", rsList[1]: "2"} {
				want := map[string]string{revisionAnnotation: revision, desiredReplicasAnnotation: "10", maxReplicasAnnotation: maxReplicas}
				if !maps.Equal(rs.Annotations, want) {
					t.Errorf("replica set %s has annotations %v, want %v", rs.Name, rs.Annotations, want)
				}
				if rs.Spec.MinReadySeconds != 1 {
					t.Errorf("replica set %s has minReadySeconds %d, want the deployment's 1", rs.Name, rs.Spec.MinReadySeconds)
				}
			}
			pods, err := web.pods()
			if err != nil {
				t.Fatal(err)
			}
			d2 := web.get()
			if err := checkHashAgreement(d2, newRS, pods, podTemplateHash(&d2.Spec.Template, nil)); err != nil {
				t.Error(err)
			}
			for _, step := range tt.firstSteps {
				web.expectEvent(corev1.EventTypeNormal, "ScalingReplicaSet", fmt.Sprintf(step, oldRS.Name, newRS.Name))
			}

			if tt.holdOldPods {
				// All 10 old pods are still there, terminating, next to the 10 new ones,
				// and the status says so.
				if want := int(2 * tt.bounds.replicas); ext.maxPodsWithTerminating != want {
					t.Errorf("saw at most %d pods with terminating ones, want %d", ext.maxPodsWithTerminating, want)
				}
				web.expectTerminating(10)
				releaseHeldPods(t, f.Client, f.Namespace)
				web.expectTerminating(0)
			}
		})
	}
}

// Scaling a Deployment in the middle of a stuck rollout spreads the new replicas over
// the old and new ReplicaSets in proportion to their sizes, instead of feeding only the
// new one (sync.go scale; upstream TestScaledRolloutDeployment). Every ReplicaSet then
// records the new desired and maximum size.
func TestScalingDuringAStuckRolloutIsProportional(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 10)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{
		MaxSurge:       ptr.To(intstr.FromInt32(3)),
		MaxUnavailable: ptr.To(intstr.FromInt32(2)),
	}
	web := createDeployment(t, f, d)
	_, firstRS := web.waitForRollout("1", image(1))

	// Revision 2 can never schedule, so its pods never become available. The rollout
	// goes as far as the bounds allow and stops: the new ReplicaSet starts at 3 while
	// the old one drops to 8 (13 - 8 - 3 = 2 may go); the new one then grows to the
	// remaining surge, 5; after that 13 - 8 - 5 = 0 more old pods may go.
	web.update(func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = image(2)
		unschedulable(d)
	})
	secondRS := web.waitForSizes("stuck rollout", map[string]int32{firstRS.Name: 8}, 5, "10", "13")

	// Scaling to 20 allows 23 pods, 10 more than the 13 the ReplicaSets have. Each
	// ReplicaSet grows to round(size × 23 / 13), its max-replicas annotation being 13:
	// 8 → 14 and 5 → 9, which hands out exactly 10.
	web.update(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(20)) })
	web.waitForSizes("proportional scale-up", map[string]int32{firstRS.Name: 14, secondRS.Name: 9}, 9, "20", "23")
	web.expectEvent(corev1.EventTypeNormal, "ScalingReplicaSet", fmt.Sprintf("Scaled up replica set %s from 8 to 14", firstRS.Name))
	web.expectEvent(corev1.EventTypeNormal, "ScalingReplicaSet", fmt.Sprintf("Scaled up replica set %s from 5 to 9", secondRS.Name))

	// 14 available of 20 wanted is below the 18 the Deployment needs; the 9 pending
	// pods of revision 2 are the updated ones, and unavailable is the sum of specs
	// minus the available pods.
	web.eventually(30*time.Second, "status of the stuck rollout", func() error {
		stuck := web.get()
		if got, want := statusCounts(stuck.Status), "replicas 23, updated 9, ready 14, available 14, unavailable 9, terminating 0"; got != want {
			return fmt.Errorf("status is %s, want %s", got, want)
		}
		return expectCondition(stuck, appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable)
	})

	// A schedulable revision 3 finishes the rollout at 20; every ReplicaSet, old ones
	// included, was last sized for 20.
	web.update(func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = image(3)
		d.Spec.Template.Spec.NodeSelector = nil
	})
	web.waitForRollout("3", image(3))
	for _, rs := range web.mustReplicaSets() {
		if got := rs.Annotations[desiredReplicasAnnotation]; got != "20" {
			t.Errorf("replica set %s has %s=%q, want 20", rs.Name, desiredReplicasAnnotation, got)
		}
	}
}

// expectTerminating waits until the Deployment reports n terminating replicas.
func (dt *deploymentTester) expectTerminating(n int32) {
	dt.t.Helper()
	dt.eventually(30*time.Second, fmt.Sprintf("%d terminating replicas", n), func() error {
		if got := dt.get().Status.TerminatingReplicas; got == nil || *got != n {
			return fmt.Errorf("status.terminatingReplicas is %s", ptrString(got))
		}
		return nil
	})
}

// waitForSizes waits until the old ReplicaSets named in oldSizes have those sizes and
// a new ReplicaSet (the one with the Deployment's template) has newSize, all of them
// annotated with the given desired and max replicas and at rest (every pod the spec
// asks for exists). It returns the new ReplicaSet.
func (dt *deploymentTester) waitForSizes(what string, oldSizes map[string]int32, newSize int32, desired, maxReplicas string) *appsv1.ReplicaSet {
	dt.t.Helper()
	var newRS *appsv1.ReplicaSet
	dt.eventually(rolloutTimeout, what, func() error {
		s, err := dt.snapshot()
		if err != nil {
			return err
		}
		if s.d.Status.ObservedGeneration < s.d.Generation {
			return fmt.Errorf("generation %d not observed yet", s.d.Generation)
		}
		newRS = nil
		for _, rs := range s.rsList {
			want, isOld := oldSizes[rs.Name]
			switch {
			case equalIgnoreHash(&rs.Spec.Template, &s.d.Spec.Template):
				newRS, want = rs, newSize
			case !isOld:
				return fmt.Errorf("unexpected replica set %s", rs.Name)
			}
			if *rs.Spec.Replicas != want || rs.Status.Replicas != want {
				return fmt.Errorf("replica set %s has %d/%d replicas, want %d", rs.Name, rs.Status.Replicas, *rs.Spec.Replicas, want)
			}
			if rs.Annotations[desiredReplicasAnnotation] != desired || rs.Annotations[maxReplicasAnnotation] != maxReplicas {
				return fmt.Errorf("replica set %s is annotated desired %q, max %q; want %s and %s", rs.Name,
					rs.Annotations[desiredReplicasAnnotation], rs.Annotations[maxReplicasAnnotation], desired, maxReplicas)
			}
		}
		if newRS == nil {
			return fmt.Errorf("no replica set has the deployment's template")
		}
		return nil
	})
	return newRS
}
