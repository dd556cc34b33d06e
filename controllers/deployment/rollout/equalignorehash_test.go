package rollout

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// templateVariants returns templates that differ from template("app:1") in one way
// each, some of them only in spelling (semantically equal), keyed by what changed.
func templateVariants() map[string]corev1.PodTemplateSpec {
	variants := map[string]func(t *corev1.PodTemplateSpec){
		"same":              func(t *corev1.PodTemplateSpec) {},
		"hash label only":   func(t *corev1.PodTemplateSpec) { t.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc" },
		"extra label":       func(t *corev1.PodTemplateSpec) { t.Labels["tier"] = "web" },
		"label value":       func(t *corev1.PodTemplateSpec) { t.Labels["app"] = "other" },
		"annotation":        func(t *corev1.PodTemplateSpec) { t.Annotations = map[string]string{"a": "b"} },
		"empty annotations": func(t *corev1.PodTemplateSpec) { t.Annotations = map[string]string{} },
		"image":             func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "app:2" },
		"command":           func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Command = []string{"serve"} },
		"empty command":     func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Command = []string{} },
		"args":              func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Args = []string{"-v"} },
		"env value":         func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "2"}} },
		"env name":          func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "B", Value: "1"}} },
		"second container": func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: "b"})
		},
		"init container":  func(t *corev1.PodTemplateSpec) { t.Spec.InitContainers = []corev1.Container{{Name: "init"}} },
		"empty init list": func(t *corev1.PodTemplateSpec) { t.Spec.InitContainers = []corev1.Container{} },
		"node selector":   func(t *corev1.PodTemplateSpec) { t.Spec.NodeSelector = map[string]string{"zone": "a"} },
		"memory as 1Gi": func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
		},
		"memory in bytes": func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1073741824")
		},
		"cpu as 0.5": func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("0.5")
		},
		"env from field path":    func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env[0].ValueFrom = &corev1.EnvVarSource{} },
		"empty security context": func(t *corev1.PodTemplateSpec) { t.Spec.SecurityContext = &corev1.PodSecurityContext{} },
		"no env":                 func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env = nil },
		"empty env":              func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env = []corev1.EnvVar{} },
		"timestamp in UTC":       func(t *corev1.PodTemplateSpec) { t.CreationTimestamp = metav1.NewTime(instant) },
		"timestamp elsewhere": func(t *corev1.PodTemplateSpec) {
			t.CreationTimestamp = metav1.NewTime(instant.In(time.FixedZone("x", 3600)))
		},
		"grace period":      func(t *corev1.PodTemplateSpec) { t.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30) },
		"zero grace period": func(t *corev1.PodTemplateSpec) { t.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) },
	}
	out := map[string]corev1.PodTemplateSpec{}
	for name, change := range variants {
		t := corev1.PodTemplateSpec{}
		t.Labels = map[string]string{"app": "web"}
		t.Spec.Containers = []corev1.Container{{
			Name: "a", Image: "app:1",
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("1Gi"),
				corev1.ResourceCPU:    resource.MustParse("500m"),
			}},
		}}
		change(&t)
		out[name] = t
	}
	return out
}

// instant is a timestamp some template variants carry.
var instant = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestEqualIgnoreHashAgreesWithSemanticEquality compares every pair of variants: the
// fast string checks must never call semantically equal templates different, whatever
// their spelling.
func TestEqualIgnoreHashAgreesWithSemanticEquality(t *testing.T) {
	variants := templateVariants()
	for nameA, a := range variants {
		for nameB, b := range variants {
			x, y := a.DeepCopy(), b.DeepCopy()
			delete(x.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
			delete(y.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
			want := equality.Semantic.DeepEqual(x, y)
			if got := EqualIgnoreHash(&a, &b); got != want {
				t.Errorf("EqualIgnoreHash(%s, %s) = %v, semantic equality says %v", nameA, nameB, got, want)
			}
			if want && differInStrings(&a, &b) {
				t.Errorf("%s and %s are equal but the string checks call them different", nameA, nameB)
			}
			if !want && sameEncoding(&a, &b) {
				t.Errorf("%s and %s differ but encode the same", nameA, nameB)
			}
		}
	}
	// The spellings of one quantity are equal, so no string check may tell them apart.
	gi, bytes := variants["memory as 1Gi"], variants["memory in bytes"]
	if !EqualIgnoreHash(&gi, &bytes) {
		t.Error("1Gi and 1073741824 bytes must compare equal")
	}
}
