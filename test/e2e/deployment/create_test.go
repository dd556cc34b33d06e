package deployment

import (
	"fmt"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A new Deployment gets exactly one ReplicaSet, named and labelled with the hash of its
// template, at revision 1, and reports itself available and complete once the pods
// are Ready (upstream TestNewDeployment).
func TestNewDeploymentCreatesOneHashedReplicaSetAndBecomesAvailable(t *testing.T) {
	f := startControllers(t)
	web := createDeployment(t, f, newDeployment("web", 3))

	d, rs := web.waitForRollout("1", image(1))
	if rsList := web.mustReplicaSets(); len(rsList) != 1 {
		t.Fatalf("deployment has %d replica sets, want 1\n%s", len(rsList), web.describe())
	}
	pods, err := web.pods()
	if err != nil {
		t.Fatal(err)
	}

	// The hash is upstream's for this very template: same template, same name, so a
	// Deployment handed over from kube-controller-manager keeps its ReplicaSet.
	hash := podTemplateHash(&d.Spec.Template, nil)
	if err := checkHashAgreement(d, rs, pods, hash); err != nil {
		t.Fatalf("%v\n%s", err, web.describe())
	}

	ref := metav1.GetControllerOf(rs)
	wantRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
		Controller: new(true), BlockOwnerDeletion: new(true)}
	if ref == nil || !equality.Semantic.DeepEqual(*ref, wantRef) {
		t.Errorf("replica set controllerRef is %+v, want %+v", ref, wantRef)
	}
	const key = appsv1.DefaultDeploymentUniqueLabelKey
	wantTemplate := d.Spec.Template.DeepCopy()
	wantTemplate.Labels[key] = hash
	if !equality.Semantic.DeepEqual(rs.Spec.Template, *wantTemplate) {
		t.Errorf("replica set template differs from the deployment's plus the hash label:\n got %+v\nwant %+v", rs.Spec.Template, *wantTemplate)
	}
	wantSelector := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", key: hash}}
	if !equality.Semantic.DeepEqual(*rs.Spec.Selector, wantSelector) {
		t.Errorf("replica set selector is %+v, want %+v", *rs.Spec.Selector, wantSelector)
	}
	if want := map[string]string{"app": "web", key: hash}; !maps.Equal(rs.Labels, want) {
		t.Errorf("replica set labels are %v, want %v", rs.Labels, want)
	}
	// max-replicas is replicas + maxSurge, and the default 25% surge rounds up: 3 + 1.
	wantAnnotations := map[string]string{revisionAnnotation: "1", desiredReplicasAnnotation: "3", maxReplicasAnnotation: "4"}
	if !maps.Equal(rs.Annotations, wantAnnotations) {
		t.Errorf("replica set annotations are %v, want %v", rs.Annotations, wantAnnotations)
	}
	if *rs.Spec.Replicas != 3 || rs.Spec.MinReadySeconds != 0 {
		t.Errorf("replica set spec has replicas %d and minReadySeconds %d, want 3 and 0", *rs.Spec.Replicas, rs.Spec.MinReadySeconds)
	}

	// The controller records the revision with a status update, which persists the
	// annotation without bumping the generation; a plain update would have made it 2
	// (pkg/registry/apps/deployment/strategy.go).
	if want := map[string]string{revisionAnnotation: "1"}; !maps.Equal(d.Annotations, want) || d.Generation != 1 {
		t.Errorf("deployment has annotations %v at generation %d, want %v at generation 1", d.Annotations, d.Generation, want)
	}
	wantStatus := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            3,
		UpdatedReplicas:     3,
		ReadyReplicas:       3,
		AvailableReplicas:   3,
		UnavailableReplicas: 0,
		// DeploymentReplicaSetTerminatingReplicas is on by default in v1.37: the sum
		// over ReplicaSets that all report it, here 0.
		TerminatingReplicas: new(int32(0)),
	}
	gotStatus := d.Status
	gotStatus.Conditions = nil
	if !equality.Semantic.DeepEqual(gotStatus, wantStatus) {
		t.Errorf("deployment status is %+v, want %+v", gotStatus, wantStatus)
	}
	wantConditions := map[appsv1.DeploymentConditionType]appsv1.DeploymentCondition{
		appsv1.DeploymentAvailable: {Status: corev1.ConditionTrue, Reason: reasonMinimumAvailable,
			Message: "Deployment has minimum availability."},
		appsv1.DeploymentProgressing: {Status: corev1.ConditionTrue, Reason: reasonNewRSAvailable,
			Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs.Name)},
	}
	if len(d.Status.Conditions) != len(wantConditions) {
		t.Errorf("deployment has conditions %+v, want only Available and Progressing", d.Status.Conditions)
	}
	for condType, want := range wantConditions {
		got := condition(d, condType)
		if got == nil || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message {
			t.Errorf("condition %s is %+v, want %s/%s %q", condType, got, want.Status, want.Reason, want.Message)
		}
	}

	web.expectEvent(corev1.EventTypeNormal, "ScalingReplicaSet", fmt.Sprintf("Scaled up replica set %s from 0 to 3", rs.Name))
}

// User annotations of a Deployment are copied onto its new ReplicaSet, except
// kubectl's last-applied-configuration (deployment_util.go skipCopyAnnotation).
// Copying adds and overwrites but never removes. Changing annotations or
// minReadySeconds updates the existing ReplicaSet rather than starting a rollout
// (sync.go getNewReplicaSet).
func TestUserAnnotationsAreCopiedToTheNewReplicaSet(t *testing.T) {
	f := startControllers(t)
	d := newDeployment("web", 1)
	d.Annotations = map[string]string{
		"example.com/team":                 "payments",
		"example.com/retired":              "soon",
		corev1.LastAppliedConfigAnnotation: `{"apiVersion":"apps/v1","kind":"Deployment"}`,
	}
	web := createDeployment(t, f, d)

	_, rs := web.waitForRollout("1", image(1))
	// 1 replica: the 25% surge rounds up to 1, so max-replicas is 2.
	want := map[string]string{
		"example.com/team":        "payments",
		"example.com/retired":     "soon",
		revisionAnnotation:        "1",
		desiredReplicasAnnotation: "1",
		maxReplicasAnnotation:     "2",
	}
	if !maps.Equal(rs.Annotations, want) {
		t.Fatalf("replica set annotations are %v, want %v", rs.Annotations, want)
	}

	web.update(func(d *appsv1.Deployment) {
		d.Annotations["example.com/team"] = "checkout"
		d.Annotations["example.com/oncall"] = "alice"
		delete(d.Annotations, "example.com/retired")
		d.Spec.MinReadySeconds = 2
	})
	want["example.com/team"] = "checkout"
	want["example.com/oncall"] = "alice"
	web.eventually(30*time.Second, "annotations and minReadySeconds copied to the replica set", func() error {
		got, err := f.Client.AppsV1().ReplicaSets(f.Namespace).Get(f.Context(), rs.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !maps.Equal(got.Annotations, want) || got.Spec.MinReadySeconds != 2 {
			return fmt.Errorf("replica set has annotations %v and minReadySeconds %d, want %v and 2", got.Annotations, got.Spec.MinReadySeconds, want)
		}
		return nil
	})
	web.waitForRollout("1", image(1))
	if rsList := web.mustReplicaSets(); len(rsList) != 1 {
		t.Fatalf("changing annotations and minReadySeconds made %d replica sets, want 1\n%s", len(rsList), web.describe())
	}
}
