package bench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// endpointsWorkload measures the Endpoints controller. The pods exist and are Ready
// before the controller manager starts, so that the phases measure the controller
// rather than the scheduler and KWOK: Services are created until every Endpoints
// object lists all its pods, then every pod's readiness is flipped off and back on.
func endpointsWorkload() workload {
	return workload{
		name: "endpoints",
		description: func(s Sizes) string {
			return fmt.Sprintf("%d Services over %d Ready pods each: create until every Endpoints is complete, "+
				"then mark every pod NotReady, then Ready again (pods/status patches, one Service's pods after another's)",
				s.Services, s.PodsPerService)
		},
		prepare: func(ctx context.Context, e *env) error {
			return createServicePods(ctx, e, e.cfg.Sizes.Services, e.cfg.Sizes.PodsPerService)
		},
		run: func(ctx context.Context, e *env) error {
			s, p := e.cfg.Sizes.Services, e.cfg.Sizes.PodsPerService
			if err := e.phase(ctx, Phase{Name: "create Services", Objects: s},
				func(ctx context.Context) error { return createServices(ctx, e, s) },
				func() error { return endpointsComplete(e, s, p, true) }); err != nil {
				return err
			}
			if err := e.phase(ctx, Phase{Name: "all pods NotReady", Objects: s, FromLastChange: true},
				func(ctx context.Context) error { return setPodsReady(ctx, e, s, p, false) },
				func() error { return endpointsComplete(e, s, p, false) }); err != nil {
				return err
			}
			return e.phase(ctx, Phase{Name: "all pods Ready again", Objects: s, FromLastChange: true},
				func(ctx context.Context) error { return setPodsReady(ctx, e, s, p, true) },
				func() error { return endpointsComplete(e, s, p, true) })
		},
	}
}

// endpointsRaisedWorkload is the endpoints workload under Config.RaisedSettings: operators
// raise the client rate limit of their controller managers (Gardener runs 100/200), and
// then what a readiness flip waits for is no longer the rate limit but the controller.
func endpointsRaisedWorkload() workload {
	w := endpointsWorkload()
	w.name, w.raised = "endpoints-raised", true
	description := w.description
	w.description = func(s Sizes) string { return description(s) + ", with the raised rate limit" }
	return w
}

func serviceName(i int) string { return fmt.Sprintf("svc-%d", i) }

func servicePodName(service, pod int) string { return fmt.Sprintf("svc-%d-%d", service, pod) }

// createServicePods creates p pods for each of s Services and waits until all are
// Ready. The pods are bound to the fake nodes round-robin by the benchmark, which
// takes the scheduler out of the preparation.
func createServicePods(ctx context.Context, e *env, s, p int) error {
	nodes := e.cp.NodeNames()
	err := parallel(ctx, s*p, 50, func(ctx context.Context, i int) error {
		service, index := i/p, i%p
		template := podTemplate(map[string]string{"svc": serviceName(service)}, "1")
		pod := &corev1.Pod{ObjectMeta: template.ObjectMeta, Spec: template.Spec}
		pod.Name = servicePodName(service, index)
		pod.Spec.NodeName = nodes[i%len(nodes)]
		if _, err := e.client.CoreV1().Pods(benchNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return e.waitConverged(ctx, "pods Ready", func() error {
		pods, err := e.pods.List(everything)
		if err != nil {
			return err
		}
		ready := 0
		for _, pod := range pods {
			if podReady(pod) && pod.Status.PodIP != "" {
				ready++
			}
		}
		return progressOrNil("pods Ready", ready, s*p)
	})
}

func createServices(ctx context.Context, e *env, s int) error {
	return parallel(ctx, s, 20, func(ctx context.Context, i int) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: serviceName(i)},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"svc": serviceName(i)},
				// A named target port: the controller resolves it from each pod's spec.
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			},
		}
		if _, err := e.client.CoreV1().Services(benchNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Service %s: %w", svc.Name, err)
		}
		return nil
	})
}

// setPodsReady sets the Ready condition of every pod, as a kubelet does when a
// readiness probe starts failing or passing. KWOK leaves Running pods alone, so the
// condition stays as set. Pods are patched one Service's pods after another's, as when
// applications fail and recover one by one.
func setPodsReady(ctx context.Context, e *env, s, p int, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.NewTime(time.Now()).Rfc3339Copy().UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":%q,"lastTransitionTime":%q},`+
		`{"type":"ContainersReady","status":%q,"lastTransitionTime":%q}]}}`, status, now, status, now)
	return parallel(ctx, s*p, 50, func(ctx context.Context, i int) error {
		name := servicePodName(i/p, i%p)
		_, err := e.client.CoreV1().Pods(benchNamespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			return fmt.Errorf("patching the status of pod %s: %w", name, err)
		}
		return nil
	})
}

// endpointsComplete checks that each of s Endpoints objects lists its p pods, all as
// ready addresses (ready) or all as not-ready addresses (!ready).
func endpointsComplete(e *env, s, p int, ready bool) error {
	complete := 0
	for i := range s {
		ep, err := e.endpoints.Get(serviceName(i))
		if err != nil {
			continue
		}
		readyAddresses, notReadyAddresses := 0, 0
		for _, subset := range ep.Subsets {
			readyAddresses += len(subset.Addresses)
			notReadyAddresses += len(subset.NotReadyAddresses)
		}
		if (ready && readyAddresses == p && notReadyAddresses == 0) || (!ready && readyAddresses == 0 && notReadyAddresses == p) {
			complete++
		}
	}
	return progressOrNil("Endpoints complete", complete, s)
}
