package sample

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

const sampleDir = "../../../../deploy/sample"

func TestLoadReadsTheSampleApp(t *testing.T) {
	app, err := Load(sampleDir)
	if err != nil {
		t.Fatal(err)
	}
	if app.Namespace() != "mini-kcm-demo" || app.Deployment.Name != "sample" || app.Service.Name != "sample" {
		t.Errorf("loaded deployment %s/%s and service %s", app.Namespace(), app.Deployment.Name, app.Service.Name)
	}
	if app.Service.Namespace != app.Namespace() || app.Manifests[0].Object.GetName() != app.Namespace() {
		t.Errorf("the Service (%s) and the Namespace (%s) are not in the Deployment's namespace %s",
			app.Service.Namespace, app.Manifests[0].Object.GetName(), app.Namespace())
	}
}

func TestRolledOutNamesWhatIsMissing(t *testing.T) {
	app, err := Load(sampleDir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// change breaks one part of a rolled-out app of 2 pods.
		change func(d *appsv1.Deployment, pods []*corev1.Pod, ep *corev1.Endpoints)
		want   string
	}{
		{name: "rolled out", change: func(*appsv1.Deployment, []*corev1.Pod, *corev1.Endpoints) {}},
		{name: "status not observed", want: "status", change: func(d *appsv1.Deployment, _ []*corev1.Pod, _ *corev1.Endpoints) {
			d.Generation = 2
		}},
		{name: "not Available", want: "not Available", change: func(d *appsv1.Deployment, _ []*corev1.Pod, _ *corev1.Endpoints) {
			d.Status.Conditions[0].Status = corev1.ConditionFalse
		}},
		{name: "a pod not ready", want: "2 pods of which 1 ready", change: func(_ *appsv1.Deployment, pods []*corev1.Pod, _ *corev1.Endpoints) {
			pods[1].Status.Conditions[0].Status = corev1.ConditionFalse
		}},
		{name: "an orphan pod", want: "2 pods of which 1 ready", change: func(_ *appsv1.Deployment, pods []*corev1.Pod, _ *corev1.Endpoints) {
			pods[0].OwnerReferences = nil
		}},
		{name: "an address missing", want: "1 ready endpoint addresses", change: func(_ *appsv1.Deployment, _ []*corev1.Pod, ep *corev1.Endpoints) {
			ep.Subsets[0].Addresses = ep.Subsets[0].Addresses[:1]
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, pods, ep := rolledOutObjects(app, 2)
			tt.change(d, pods, ep)
			objects := []runtime.Object{d, ep}
			for _, p := range pods {
				objects = append(objects, p)
			}
			state, err := app.RolledOut(context.Background(), fake.NewClientset(objects...), 2)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("RolledOut = %v, want nil (state %s)", err, state)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("RolledOut = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// rolledOutObjects returns the app rolled out to n pods, as the API would show it.
func rolledOutObjects(app *App, n int32) (*appsv1.Deployment, []*corev1.Pod, *corev1.Endpoints) {
	d := app.Deployment.DeepCopy()
	d.Generation = 1
	d.Spec.Replicas = &n
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
	}
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: app.Service.Name, Namespace: app.Namespace()},
		Subsets:    []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "http", Port: 8080}}}},
	}
	isController := true
	var pods []*corev1.Pod
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "sample-" + string(rune('a'+i)), Namespace: app.Namespace(),
				Labels:          d.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "sample-1", Controller: &isController}},
			},
			Status: corev1.PodStatus{
				PodIP:      "10.0.0." + string(rune('1'+i)),
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			},
		}
		pods = append(pods, pod)
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: pod.Status.PodIP})
	}
	return d, pods, ep
}
