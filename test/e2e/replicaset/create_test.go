package replicaset

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A user creates a ReplicaSet; the controller creates its pods from the template, owned
// by the ReplicaSet, and reports them in the status once KWOK made them Ready.
func TestReplicaSetCreatesItsPodsFromTheTemplate(t *testing.T) {
	e := startEnv(t)

	rs := newReplicaSet("web", 3)
	rs.Spec.Template.Annotations = map[string]string{"example.com/owner-team": "payments"}
	rs.Spec.Template.Finalizers = []string{holdFinalizer}
	rs = e.createReplicaSet(rs)

	got := e.waitForStatus("web", settled(3))
	if got.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d, want 1", got.Status.ObservedGeneration)
	}
	if len(got.Status.Conditions) != 0 {
		t.Errorf("conditions = %+v, want none", got.Status.Conditions)
	}

	pods := e.activePodsOf(rs)
	if len(pods) != 3 {
		t.Fatalf("the ReplicaSet controls %d active pods %v, want 3", len(pods), podNames(pods))
	}
	for _, pod := range pods {
		// Upstream's GetPodFromTemplate: generateName "<owner>-", the template's
		// labels, annotations, finalizers and spec, and the controllerRef as the only
		// ownerReference.
		if pod.GenerateName != "web-" || !strings.HasPrefix(pod.Name, "web-") {
			t.Errorf("pod %s has generateName %q, want %q", pod.Name, pod.GenerateName, "web-")
		}
		if !reflect.DeepEqual(pod.Labels, templateLabels("web")) {
			t.Errorf("pod %s has labels %v, want the template's %v", pod.Name, pod.Labels, templateLabels("web"))
		}
		if !reflect.DeepEqual(pod.Annotations, rs.Spec.Template.Annotations) {
			t.Errorf("pod %s has annotations %v, want the template's %v", pod.Name, pod.Annotations, rs.Spec.Template.Annotations)
		}
		if !reflect.DeepEqual(pod.Finalizers, []string{holdFinalizer}) {
			t.Errorf("pod %s has finalizers %v, want the template's %v", pod.Name, pod.Finalizers, []string{holdFinalizer})
		}
		if want := []metav1.OwnerReference{controllerRefTo(rs)}; !reflect.DeepEqual(pod.OwnerReferences, want) {
			t.Errorf("pod %s has ownerReferences %+v, want %+v", pod.Name, pod.OwnerReferences, want)
		}
		if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != "registry.k8s.io/pause:3.10" {
			t.Errorf("pod %s has containers %+v, want the template's", pod.Name, pod.Spec.Containers)
		}
		if pod.Status.Phase != v1.PodRunning || !isReady(&pod) || pod.Status.PodIP == "" {
			t.Errorf("pod %s is %s, ready=%v, IP %q; KWOK should have made it Running and Ready with an IP",
				pod.Name, pod.Status.Phase, isReady(&pod), pod.Status.PodIP)
		}
	}

	// Upstream's RealPodControl records one event per pod, from replicaset-controller.
	e.waitForEvents("web", v1.EventTypeNormal, "SuccessfulCreate", prefixed("Created pod: ", podNames(pods)))
}
