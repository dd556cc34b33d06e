package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// scaleRollingUpdates is how many Deployments the scale workload's rolling update
// changes.
const scaleRollingUpdates = 10

// scaleWorkload is the cluster-sized workload of issue 33 (`make bench-scale`, run only
// when named): Deployments over the KWOK nodes, a Service selecting each one's pods,
// every controller of the registry (the EndpointSlice controller too), through the
// phases of a cluster's life: create until Available, a rolling update of ten
// Deployments, a third of the pods NotReady and Ready again, every Deployment scaled to
// half.
func scaleWorkload() workload {
	return workload{
		name:            "scale",
		optIn:           true,
		everyController: true,
		description: func(s Sizes) string {
			return fmt.Sprintf("%d Deployments of %d replicas (%d pods), a Service selecting each one's pods (Endpoints and EndpointSlices): "+
				"create until Available and every Service's endpoints are complete, a rolling update of %d Deployments, "+
				"a third of the pods NotReady, Ready again (pods/status patches), then every Deployment scaled to %d",
				s.ScaleDeployments, s.ScaleReplicas, s.ScaleDeployments*s.ScaleReplicas, min(scaleRollingUpdates, s.ScaleDeployments), s.ScaleReplicas/2)
		},
		run: runScale,
	}
}

func runScale(ctx context.Context, e *env) error {
	n, r := e.cfg.Sizes.ScaleDeployments, e.cfg.Sizes.ScaleReplicas
	all := func(want int) func(int) int { return func(int) int { return want } }
	none := all(0)
	converged := func(replicas int, ready, notReady func(i int) int) func() error {
		return func() error {
			if err := deploymentsReady(e, n, replicas, ready); err != nil {
				return err
			}
			return scaleEndpointsComplete(e, n, ready, notReady)
		}
	}
	if err := e.phase(ctx, Phase{Name: "create to Available", Objects: n * r},
		func(ctx context.Context) error {
			if err := createScaleServices(ctx, e, n); err != nil {
				return err
			}
			return createDeployments(ctx, e, n, r)
		},
		converged(r, all(r), none)); err != nil {
		return err
	}
	updated := min(scaleRollingUpdates, n)
	rolling := fmt.Sprintf("rolling update of %d", updated)
	// Where the CPU goes, in the phase that spends most of it: a profile of its first
	// minute, waited for before the next phase so that it sees this one only.
	var profile func() *CPUBreakdown
	if err := e.phase(ctx, Phase{Name: rolling, Objects: updated * r},
		func(ctx context.Context) error {
			profile = e.startCPUProfile(ctx, fmt.Sprintf("the first %d s of the %s", scaleProfileSeconds, rolling), scaleProfileSeconds)
			return updateDeployments(ctx, e, updated, "2")
		},
		converged(r, all(r), none)); err != nil {
		return err
	}
	e.run.CPUProfile = profile()

	// A third of every Deployment's pods, chosen from the benchmark's cache.
	third, err := scaleThird(e, n)
	if err != nil {
		return err
	}
	flipped := 0
	for _, names := range third {
		flipped += len(names)
	}
	notReady := func(i int) int { return len(third[i]) }
	ready := func(i int) int { return r - len(third[i]) }
	if err := e.phase(ctx, Phase{Name: "a third NotReady", Objects: flipped, FromLastChange: true},
		func(ctx context.Context) error { return patchPodsReady(ctx, e, third, false) },
		converged(r, ready, notReady)); err != nil {
		return err
	}
	if err := e.phase(ctx, Phase{Name: "Ready again", Objects: flipped, FromLastChange: true},
		func(ctx context.Context) error { return patchPodsReady(ctx, e, third, true) },
		converged(r, all(r), none)); err != nil {
		return err
	}
	half := r / 2
	return e.phase(ctx, Phase{Name: fmt.Sprintf("scale to %d", half), Objects: n * (r - half)},
		func(ctx context.Context) error { return scaleDeployments(ctx, e, n, half) },
		converged(half, all(half), none))
}

// createScaleServices creates a Service per Deployment, named alike, selecting its pods.
func createScaleServices(ctx context.Context, e *env, n int) error {
	return parallel(ctx, n, 20, func(ctx context.Context, i int) error {
		name := deploymentName(i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			},
		}
		if _, err := e.client.CoreV1().Services(benchNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Service %s: %w", name, err)
		}
		return nil
	})
}

// deploymentsReady checks that n Deployments have rolled out completely at replicas,
// ready(i) of Deployment i's pods Ready: complete (deploymentsComplete) when all are.
func deploymentsReady(e *env, n, replicas int, ready func(i int) int) error {
	if ready(0) == replicas {
		return deploymentsComplete(e, n, replicas)
	}
	done := 0
	for i := range n {
		d, err := e.deployments.Get(deploymentName(i))
		if err != nil {
			continue
		}
		if int(d.Status.Replicas) == replicas && int(d.Status.ReadyReplicas) == ready(i) && d.Status.ObservedGeneration >= d.Generation {
			done++
		}
	}
	return progressOrNil("Deployments with the pods Ready", done, n)
}

// scaleEndpointsComplete checks that the Endpoints and the EndpointSlices of every
// Service list ready(i) ready and notReady(i) not-ready endpoints.
func scaleEndpointsComplete(e *env, n int, ready, notReady func(i int) int) error {
	complete := 0
	for i := range n {
		name := deploymentName(i)
		ep, err := e.endpoints.Get(name)
		if err != nil {
			continue
		}
		readyAddresses, notReadyAddresses := 0, 0
		for _, subset := range ep.Subsets {
			readyAddresses += len(subset.Addresses)
			notReadyAddresses += len(subset.NotReadyAddresses)
		}
		if readyAddresses != ready(i) || notReadyAddresses != notReady(i) {
			continue
		}
		slices, err := e.endpointSlices.List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
		if err != nil {
			return err
		}
		readyEndpoints, notReadyEndpoints := 0, 0
		for _, slice := range slices {
			for _, endpoint := range slice.Endpoints {
				if endpoint.Conditions.Ready != nil && *endpoint.Conditions.Ready {
					readyEndpoints++
				} else {
					notReadyEndpoints++
				}
			}
		}
		if readyEndpoints == ready(i) && notReadyEndpoints == notReady(i) {
			complete++
		}
	}
	return progressOrNil("Services whose Endpoints and EndpointSlices are complete", complete, n)
}

// scaleThird returns, for each of n Deployments, the names of a third of its pods:
// every third in name order.
func scaleThird(e *env, n int) ([][]string, error) {
	third := make([][]string, n)
	for i := range n {
		pods, err := e.pods.List(labels.SelectorFromSet(labels.Set{"app": deploymentName(i)}))
		if err != nil {
			return nil, err
		}
		var names []string
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil {
				names = append(names, pod.Name)
			}
		}
		slices.Sort(names)
		for j, name := range names {
			if j%3 == 0 {
				third[i] = append(third[i], name)
			}
		}
	}
	return third, nil
}

// patchPodsReady sets the Ready and ContainersReady conditions of the named pods, as
// setPodsReady does for the endpoints workload.
func patchPodsReady(ctx context.Context, e *env, names [][]string, ready bool) error {
	var all []string
	for _, n := range names {
		all = append(all, n...)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.NewTime(time.Now()).Rfc3339Copy().UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":%q,"lastTransitionTime":%q},`+
		`{"type":"ContainersReady","status":%q,"lastTransitionTime":%q}]}}`, status, now, status, now)
	return parallel(ctx, len(all), 50, func(ctx context.Context, i int) error {
		_, err := e.client.CoreV1().Pods(benchNamespace).Patch(ctx, all[i], types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			return fmt.Errorf("patching the status of pod %s: %w", all[i], err)
		}
		return nil
	})
}
