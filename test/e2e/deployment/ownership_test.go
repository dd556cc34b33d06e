package deployment

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// When the name <deployment>-<hash> is taken by a ReplicaSet with another template,
// the controller counts a collision in status.collisionCount, which changes the hash,
// and creates its ReplicaSet under the new name; the other ReplicaSet is left alone
// (sync.go getNewReplicaSet; upstream TestDeploymentHashCollision).
func TestHashCollisionBumpsCollisionCountAndPicksANewName(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 2)

	// The hash covers the template as stored, defaults included; a dry run returns it
	// without creating anything.
	defaulted, err := f.Client.AppsV1().Deployments(f.Namespace).Create(f.Context(), d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	takenName := d.Name + "-" + podTemplateHash(&defaulted.Spec.Template, nil)
	otherLabels := map[string]string{"app": "other"}
	squatter := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: takenName, Labels: otherLabels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: otherLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: otherLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "registry.example/other:v1"}}},
			},
		},
	}
	if _, err := f.Client.AppsV1().ReplicaSets(f.Namespace).Create(f.Context(), squatter, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating replica set %s: %v", takenName, err)
	}

	web := createDeployment(t, f, d)
	d, rs := web.waitForRollout("1", image(1))
	if d.Status.CollisionCount == nil || *d.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount is %s, want 1\n%s", ptrString(d.Status.CollisionCount), web.describe())
	}
	pods, err := web.pods()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkHashAgreement(d, rs, pods, podTemplateHash(&d.Spec.Template, ptr.To(int32(1)))); err != nil {
		t.Fatalf("%v\n%s", err, web.describe())
	}

	got, err := f.Client.AppsV1().ReplicaSets(f.Namespace).Get(f.Context(), takenName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the replica set that held the name: %v", err)
	}
	if len(got.OwnerReferences) != 0 || *got.Spec.Replicas != 0 || got.Spec.Template.Spec.Containers[0].Image != "registry.example/other:v1" {
		t.Errorf("the replica set that held the name was changed: owners %v, replicas %d, image %s",
			got.OwnerReferences, *got.Spec.Replicas, got.Spec.Template.Spec.Containers[0].Image)
	}
}

// A ReplicaSet of the Deployment's template that nobody controls, such as one left by
// a previous controller manager, is adopted as the Deployment's new ReplicaSet: no
// second ReplicaSet, no pod replaced (controller_ref_manager.go ClaimReplicaSets;
// upstream TestGeneralReplicaSetAdoption).
func TestDeploymentAdoptsAnOrphanReplicaSetOfItsTemplate(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 2)
	defaulted, err := f.Client.AppsV1().Deployments(f.Namespace).Create(f.Context(), d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	hash := podTemplateHash(&defaulted.Spec.Template, nil)
	hashed := map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
	template := *defaulted.Spec.Template.DeepCopy()
	template.Labels = hashed
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Labels: hashed},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: hashed},
			Template: template,
		},
	}
	if _, err := f.Client.AppsV1().ReplicaSets(f.Namespace).Create(f.Context(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its pods run before the Deployment exists.
	var podUIDs []string
	framework.Eventually(t, rolloutTimeout, func() error {
		pods, err := f.Client.CoreV1().Pods(f.Namespace).List(f.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		podUIDs = nil
		for _, pod := range pods.Items {
			if !isPodReady(&pod) {
				return fmt.Errorf("pod %s is not ready", pod.Name)
			}
			podUIDs = append(podUIDs, string(pod.UID))
		}
		if len(podUIDs) != 2 {
			return fmt.Errorf("%d pods, want 2", len(podUIDs))
		}
		return nil
	})

	web := createDeployment(t, f, d)
	d, rs := web.waitForRollout("1", image(1))
	if rs.Name != orphan.Name || len(web.mustReplicaSets()) != 1 {
		t.Fatalf("the deployment runs on %s, want the adopted %s alone\n%s", rs.Name, orphan.Name, web.describe())
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.UID != d.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("adopted replica set has controllerRef %+v, want the deployment with blockOwnerDeletion", ref)
	}
	// Adoption finds the ReplicaSet already at the right size, so only the revision is
	// recorded; desired and max replicas are written by the next resize.
	if want := map[string]string{revisionAnnotation: "1"}; !maps.Equal(rs.Annotations, want) {
		t.Errorf("adopted replica set has annotations %v, want %v", rs.Annotations, want)
	}
	pods, err := web.pods()
	if err != nil {
		t.Fatal(err)
	}
	var after []string
	for _, pod := range pods {
		after = append(after, string(pod.UID))
	}
	slices.Sort(podUIDs)
	slices.Sort(after)
	if !slices.Equal(podUIDs, after) {
		t.Errorf("pods were replaced on adoption: %v before, %v after", podUIDs, after)
	}
	events, err := web.events()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Reason == "ScalingReplicaSet" {
			t.Errorf("adoption scaled a replica set: %s", e.Message)
		}
	}
}
