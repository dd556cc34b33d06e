package deployment

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A rollout that makes no progress for progressDeadlineSeconds is reported as
// Progressing=False/ProgressDeadlineExceeded, with no event needed to notice it (the
// controller requeues itself for the deadline: progress.go requeueStuckDeployment). It
// recovers once its pods become available (upstream TestFailedDeployment).
func TestRolloutWithoutProgressExceedsItsDeadlineAndRecovers(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 2)
	d.Spec.ProgressDeadlineSeconds = ptr.To(int32(3))
	unschedulable(d)
	web := createDeployment(t, f, d)

	var rs *appsv1.ReplicaSet
	web.eventually(rolloutTimeout, "progress deadline exceeded", func() error {
		s, err := web.snapshot()
		if err != nil {
			return err
		}
		if len(s.rsList) != 1 {
			return fmt.Errorf("%d replica sets, want 1", len(s.rsList))
		}
		rs = s.rsList[0]
		if err := expectConditionMessage(s.d, appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonDeadlineExceeded,
			fmt.Sprintf("ReplicaSet %q has timed out progressing.", rs.Name)); err != nil {
			return err
		}
		return expectConditionMessage(s.d, appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable,
			"Deployment does not have minimum availability.")
	})

	// The capacity arrives late: the pending pods are bound to a node by hand, which is
	// what a scheduler would do once a node that fits appears.
	pods, err := web.pods()
	if err != nil {
		t.Fatal(err)
	}
	node := f.ControlPlane.NodeNames()[0]
	for _, pod := range pods {
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}
		if err := f.Client.CoreV1().Pods(f.Namespace).Bind(f.Context(), binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("binding pod %s to %s: %v", pod.Name, node, err)
		}
	}
	d, _ = web.waitForRollout("1", image(1))
	if got := condition(d, appsv1.DeploymentProgressing).Message; got != fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs.Name) {
		t.Errorf("Progressing message after recovery is %q", got)
	}
}
