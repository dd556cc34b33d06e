package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
