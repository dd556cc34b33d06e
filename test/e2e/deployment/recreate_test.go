package deployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// holdFinalizer keeps a deleted pod Terminating until the test removes it, standing in
// for a container that is slow to stop. KWOK finishes a deletion only once a pod has
// no finalizers.
const holdFinalizer = "e2e.mini-kcm.io/hold"

// A Recreate rollout first takes the old ReplicaSet to 0 and starts the new pods only
// once every old pod is gone, terminating ones included (recreate.go oldPodsRunning;
// upstream TestRecreateDeploymentForPodReplacement). Old and new pods never exist at
// the same time, checked every ~100ms.
func TestRecreateStartsNewPodsOnlyAfterOldPodsAreGone(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 3)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	d.Spec.Template.Finalizers = []string{holdFinalizer}
	web := createDeployment(t, f, d)
	t.Cleanup(func() { releaseHeldPods(t, f.Client, f.Namespace) })
	_, oldRS := web.waitForRollout("1", image(1))

	web.update(func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = image(2)
		d.Spec.Template.Finalizers = nil
	})

	samples := 0
	neverTogether := func(s snapshot) {
		samples++
		var oldPods, newPods []string
		for _, pod := range s.pods {
			if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == oldRS.UID {
				oldPods = append(oldPods, pod.Name)
			} else {
				newPods = append(newPods, pod.Name)
			}
		}
		if len(oldPods) > 0 && len(newPods) > 0 {
			t.Fatalf("at %s new pods %v exist while old pods %v are still there\n%s",
				s.at.Format(time.StampMilli), newPods, oldPods, web.describe())
		}
	}

	// The old pods are deleted and stay Terminating. The Deployment reports them as
	// terminating, not as replicas (status.terminatingReplicas, on by default in
	// v1.37), and creates no new ReplicaSet while they exist.
	web.eventually(rolloutTimeout, "old pods terminating and reported", func() error {
		s, err := web.snapshot()
		if err != nil {
			return err
		}
		neverTogether(s)
		if c := countPods(s.pods, 0, s.at); c.terminating != 3 || c.active != 0 {
			return fmt.Errorf("%d old pods terminating and %d active, want 3 and 0", c.terminating, c.active)
		}
		if got, want := statusCounts(s.d.Status), "replicas 0, updated 0, ready 0, available 0, unavailable 0, terminating 3"; got != want {
			return fmt.Errorf("status is %s, want %s", got, want)
		}
		return expectCondition(s.d, appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable)
	})
	// Nothing must happen while the old pods are held, however long that is; a few
	// seconds give a wrong controller ample time to show itself.
	for hold := time.Now().Add(3 * time.Second); time.Now().Before(hold); time.Sleep(100 * time.Millisecond) {
		s, err := web.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		neverTogether(s)
		if len(s.rsList) != 1 {
			t.Fatalf("a new replica set exists while old pods are terminating\n%s", web.describe())
		}
	}

	releaseHeldPods(t, f.Client, f.Namespace)
	var newRS *appsv1.ReplicaSet
	web.eventually(rolloutTimeout, "recreate rollout to revision 2", func() error {
		s, err := web.snapshot()
		if err != nil {
			return err
		}
		neverTogether(s)
		newRS, err = s.complete("2", image(2))
		return err
	})
	t.Logf("%d samples, none with old and new pods together", samples)

	// Recreate creates the new ReplicaSet at full size in one step.
	web.expectEvent(corev1.EventTypeNormal, "ScalingReplicaSet", fmt.Sprintf("Scaled down replica set %s from 3 to 0", oldRS.Name))
	web.expectEvent(corev1.EventTypeNormal, "ScalingReplicaSet", fmt.Sprintf("Scaled up replica set %s from 0 to 3", newRS.Name))
}

// releaseHeldPods removes holdFinalizer from every pod of the namespace, so KWOK can
// finish their deletion. It also runs at cleanup, where the test's context is over.
func releaseHeldPods(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := func() error {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var errs []error
		for _, pod := range pods.Items {
			if !slices.Contains(pod.Finalizers, holdFinalizer) {
				continue
			}
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			_, err := client.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("releasing pod %s: %w", pod.Name, err))
			}
		}
		return errors.Join(errs...)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = release(); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("releasing held pods: %v", err)
}
