package deployment

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// A paused Deployment creates no ReplicaSet and does not roll out a new template, but
// still scales; resuming starts the rollout. Pausing and resuming show in the
// Progressing condition as Unknown/DeploymentPaused and Unknown/DeploymentResumed
// (deployment_controller.go checkPausedConditions; upstream TestPausedDeployment and
// TestScalePausedDeployment).
func TestPausedDeploymentScalesButDoesNotRollOut(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 2)
	d.Spec.Paused = true
	web := createDeployment(t, f, d)
	history := web.recordProgressing()

	// Created paused: the controller syncs it, but makes no ReplicaSet.
	web.eventually(30*time.Second, "paused deployment observed", func() error {
		d := web.get()
		if d.Status.ObservedGeneration < d.Generation {
			return fmt.Errorf("generation %d not observed yet", d.Generation)
		}
		return expectConditionMessage(d, appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused")
	})
	if rsList := web.mustReplicaSets(); len(rsList) != 0 {
		t.Fatalf("a paused deployment got %d replica sets\n%s", len(rsList), web.describe())
	}

	web.update(func(d *appsv1.Deployment) { d.Spec.Paused = false })
	_, firstRS := web.waitForRollout("1", image(1))

	// Paused again, a new template is recorded but not rolled out: the only
	// ReplicaSet is now an old one, so no replica counts as updated.
	web.update(func(d *appsv1.Deployment) { d.Spec.Paused = true })
	history.waitFor(t, reasonPaused, reasonResumed, reasonNewRSAvailable, reasonPaused)
	web.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image(2) })
	web.eventually(30*time.Second, "new template observed while paused", func() error {
		d := web.get()
		if d.Status.ObservedGeneration < d.Generation {
			return fmt.Errorf("generation %d not observed yet", d.Generation)
		}
		if d.Status.UpdatedReplicas != 0 {
			return fmt.Errorf("%d updated replicas, want 0 while the new template waits", d.Status.UpdatedReplicas)
		}
		return nil
	})
	if rsList := web.mustReplicaSets(); len(rsList) != 1 || web.get().Annotations[revisionAnnotation] != "1" {
		t.Fatalf("a template change rolled out while paused\n%s", web.describe())
	}

	// Scaling still works while paused: the one active ReplicaSet takes the new size.
	web.update(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(4)) })
	web.eventually(rolloutTimeout, "paused deployment scaled to 4", func() error {
		s, err := web.snapshot()
		if err != nil {
			return err
		}
		if len(s.rsList) != 1 {
			return fmt.Errorf("%d replica sets, want 1", len(s.rsList))
		}
		rs := s.rsList[0]
		// 4 + 25% surge rounded up = 5.
		if *rs.Spec.Replicas != 4 || rs.Status.AvailableReplicas != 4 ||
			rs.Annotations[desiredReplicasAnnotation] != "4" || rs.Annotations[maxReplicasAnnotation] != "5" {
			return fmt.Errorf("replica set %s has %d/%d available, desired %q, max %q; want 4/4, 4 and 5", rs.Name,
				rs.Status.AvailableReplicas, *rs.Spec.Replicas, rs.Annotations[desiredReplicasAnnotation], rs.Annotations[maxReplicasAnnotation])
		}
		if got, want := statusCounts(s.d.Status), "replicas 4, updated 0, ready 4, available 4, unavailable 0, terminating 0"; got != want {
			return fmt.Errorf("status is %s, want %s", got, want)
		}
		return nil
	})
	web.expectEvent(corev1.EventTypeNormal, "ScalingReplicaSet", fmt.Sprintf("Scaled up replica set %s from 2 to 4", firstRS.Name))

	web.update(func(d *appsv1.Deployment) { d.Spec.Paused = false })
	web.waitForRollout("2", image(2))
	// Between resuming and completing, reasons may differ from upstream's: after its
	// DeploymentResumed write, kube-controller-manager writes NewReplicaSetCreated with
	// the stale resourceVersion of the same sync, which conflicts and is lost, while
	// mini-kcm carries the resourceVersion forward and records it.
	history.waitFor(t, reasonPaused, reasonResumed, reasonNewRSAvailable, reasonPaused, reasonResumed, reasonNewRSAvailable)
	t.Logf("Progressing reasons: %s", strings.Join(history.reasons(), ", "))
	for _, c := range history.conditions() {
		switch {
		case c.Reason == reasonPaused && (c.Status != corev1.ConditionUnknown || c.Message != "Deployment is paused"),
			c.Reason == reasonResumed && (c.Status != corev1.ConditionUnknown || c.Message != "Deployment is resumed"):
			t.Errorf("Progressing condition %s/%s %q", c.Status, c.Reason, c.Message)
		}
	}
}

func expectConditionMessage(d *appsv1.Deployment, condType appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string) error {
	if err := expectCondition(d, condType, status, reason); err != nil {
		return err
	}
	if got := condition(d, condType).Message; got != message {
		return fmt.Errorf("condition %s has message %q, want %q", condType, got, message)
	}
	return nil
}

// progressingHistory is every Progressing condition a Deployment had, in order, as a
// watch reports each version of the object. Pause and resume conditions last only
// until the controller's next write, too briefly for polling to see reliably.
type progressingHistory struct {
	mu   sync.Mutex
	seen []appsv1.DeploymentCondition
	err  error
}

// recordProgressing watches the Deployment from its current version until the test
// ends.
func (dt *deploymentTester) recordProgressing() *progressingHistory {
	dt.t.Helper()
	start := dt.get()
	h := &progressingHistory{}
	h.add(start)
	ctx, cancel := context.WithCancel(dt.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resourceVersion := start.ResourceVersion
		for ctx.Err() == nil {
			w, err := dt.client.AppsV1().Deployments(dt.ns).Watch(ctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", dt.name).String(),
				ResourceVersion: resourceVersion,
			})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for event := range w.ResultChan() {
				if event.Type == watch.Error {
					// The history would have a gap; say so rather than miss a state.
					h.fail(fmt.Errorf("watch error: %v", event.Object))
					break
				}
				if d, ok := event.Object.(*appsv1.Deployment); ok {
					resourceVersion = d.ResourceVersion
					h.add(d)
				}
			}
			w.Stop()
		}
	}()
	dt.t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

func (h *progressingHistory) add(d *appsv1.Deployment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := condition(d, appsv1.DeploymentProgressing)
	if c == nil {
		return
	}
	if n := len(h.seen); n > 0 && h.seen[n-1].Reason == c.Reason && h.seen[n-1].Status == c.Status {
		return
	}
	h.seen = append(h.seen, *c)
}

func (h *progressingHistory) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

func (h *progressingHistory) conditions() []appsv1.DeploymentCondition {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]appsv1.DeploymentCondition(nil), h.seen...)
}

func (h *progressingHistory) reasons() []string {
	var reasons []string
	for _, c := range h.conditions() {
		reasons = append(reasons, c.Reason)
	}
	return reasons
}

// waitFor waits until the Progressing reasons seen so far contain want in this order,
// other reasons allowed in between.
func (h *progressingHistory) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		err := h.err
		h.mu.Unlock()
		if err != nil {
			t.Fatalf("recording the Progressing condition: %v", err)
		}
		got := h.reasons()
		if isSubsequence(want, got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Progressing reasons so far: %s; want %s in this order", strings.Join(got, ", "), strings.Join(want, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isSubsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
