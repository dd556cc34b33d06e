package rollout

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rolling returns a RollingUpdate Deployment of the given size and fenceposts.
func rolling(replicas int32, maxSurge, maxUnavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "d-uid"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template("v1"),
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       new(maxSurge),
					MaxUnavailable: new(maxUnavailable),
				},
			},
		},
	}
}

// recreate returns a Recreate Deployment of the given size.
func recreate(replicas int32) *appsv1.Deployment {
	d := rolling(replicas, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

// replicaSet returns a ReplicaSet created age minutes after baseTime.
func replicaSet(name string, replicas int32, age int) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         "default",
			UID:               types.UID(name + "-uid"),
			CreationTimestamp: metav1.NewTime(baseTime.Add(time.Duration(age) * time.Minute)),
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(replicas), Template: template(name)},
	}
}

func withAnnotations(rs *appsv1.ReplicaSet, kv ...string) *appsv1.ReplicaSet {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		rs.Annotations[kv[i]] = kv[i+1]
	}
	return rs
}

func names(rsList []*appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rsList {
		out = append(out, rs.Name)
	}
	return out
}
