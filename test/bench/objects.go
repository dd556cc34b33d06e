package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// podTemplate is the pod every workload runs: one container with the fields a typical
// application pod has (a named port, environment, resources, a readiness probe), so
// that the controller managers' caches hold realistic objects. KWOK runs no container,
// so the image is never pulled. version is the value of the VERSION variable, which a
// rolling update changes.
func podTemplate(labels map[string]string, version string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.k8s.io/pause:3.10",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{
					{Name: "VERSION", Value: version},
					{Name: "LOG_LEVEL", Value: "info"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/healthz", Port: intstr.FromString("http"),
					}},
				},
			}},
		},
	}
}

// parallel calls do(i) for i in [0, n) from workers goroutines and returns the first
// error; after an error the remaining calls are skipped.
func parallel(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) error {
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || workCtx.Err() != nil {
					return
				}
				if err := do(workCtx, i); err != nil {
					once.Do(func() { firstErr = err })
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// progress formats "what: have/want" for convergence messages.
func progress(what string, have, want int) error {
	return fmt.Errorf("%s: %d/%d", what, have, want)
}

// everything selects all objects of a lister.
var everything = labels.Everything()

// progressOrNil is nil when have reached want, else a progress error.
func progressOrNil(what string, have, want int) error {
	if have >= want {
		return nil
	}
	return progress(what, have, want)
}
