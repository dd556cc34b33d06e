package bench

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// deploymentWorkload creates Deployments until they are Available, scales them all up
// by half and back down, then rolls all of them out to a new pod template.
func deploymentWorkload() workload {
	return workload{
		name: "deployments",
		description: func(s Sizes) string {
			return fmt.Sprintf("%d Deployments of %d replicas: create until Available, scale all to %d and back to %d, "+
				"then a rolling update of all (default strategy, 25%% surge and unavailable)",
				s.Deployments, s.DeploymentReplicas, scaledUp(s.DeploymentReplicas), s.DeploymentReplicas)
		},
		run: func(ctx context.Context, e *env) error {
			n, r := e.cfg.Sizes.Deployments, e.cfg.Sizes.DeploymentReplicas
			up := scaledUp(r)
			steps := []struct {
				phase    Phase
				act      func(ctx context.Context) error
				replicas int
				version  string
			}{
				{Phase{Name: "create to Available", Objects: n * r}, func(ctx context.Context) error { return createDeployments(ctx, e, n, r) }, r, "1"},
				{Phase{Name: fmt.Sprintf("scale up %d→%d", r, up), Objects: n * (up - r)}, func(ctx context.Context) error { return scaleDeployments(ctx, e, n, up) }, up, "1"},
				{Phase{Name: fmt.Sprintf("scale down %d→%d", up, r), Objects: n * (up - r)}, func(ctx context.Context) error { return scaleDeployments(ctx, e, n, r) }, r, "1"},
				{Phase{Name: "rolling update", Objects: n * r}, func(ctx context.Context) error { return updateDeployments(ctx, e, n, "2") }, r, "2"},
			}
			for _, s := range steps {
				if err := e.phase(ctx, s.phase, s.act, func() error { return deploymentsComplete(e, n, s.replicas) }); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// scaledUp is the replica count of the scale-up phase: half as many again.
func scaledUp(replicas int) int { return replicas + max(1, replicas/2) }

func deploymentName(i int) string { return fmt.Sprintf("deploy-%d", i) }

func createDeployments(ctx context.Context, e *env, n, replicas int) error {
	return parallel(ctx, n, 20, func(ctx context.Context, i int) error {
		name := deploymentName(i)
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(replicas)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: podTemplate(labels, "1"),
			},
		}
		if _, err := e.client.AppsV1().Deployments(benchNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", name, err)
		}
		return nil
	})
}

func scaleDeployments(ctx context.Context, e *env, n, replicas int) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	return patchDeployments(ctx, e, n, patch)
}

// updateDeployments changes the VERSION variable of the pod template, which starts a
// rollout to a new ReplicaSet.
func updateDeployments(ctx context.Context, e *env, n int, version string) error {
	patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"VERSION","value":%q}]}]}}}}`, version)
	return patchDeployments(ctx, e, n, patch)
}

// patchDeployments patches the n Deployments and records the generation each patch
// produced, which deploymentsComplete waits for: until the benchmark's cache has seen
// the patch, the old generation would look complete already.
func patchDeployments(ctx context.Context, e *env, n int, patch []byte) error {
	return parallel(ctx, n, 20, func(ctx context.Context, i int) error {
		d, err := e.client.AppsV1().Deployments(benchNamespace).Patch(ctx, deploymentName(i), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("patching Deployment %s: %w", deploymentName(i), err)
		}
		e.deploymentGenerations.Store(d.Name, d.Generation)
		return nil
	})
}

// deploymentsComplete checks that n Deployments have rolled out completely at
// replicas: the generation of the last patch observed, every replica updated and
// available, no old pods left.
func deploymentsComplete(e *env, n, replicas int) error {
	deployments, err := e.deployments.List(everything)
	if err != nil {
		return err
	}
	if len(deployments) < n {
		return progress("Deployments in the cache", len(deployments), n)
	}
	done, available := 0, 0
	for _, d := range deployments {
		available += int(d.Status.AvailableReplicas)
		if patched, ok := e.deploymentGenerations.Load(d.Name); ok && d.Generation < patched.(int64) {
			continue
		}
		s := d.Status
		if s.ObservedGeneration >= d.Generation && int(s.Replicas) == replicas && int(s.UpdatedReplicas) == replicas &&
			int(s.ReadyReplicas) == replicas && int(s.AvailableReplicas) == replicas && s.UnavailableReplicas == 0 {
			done++
		}
	}
	if done < n {
		return fmt.Errorf("%w (%d pods available)", progress("Deployments complete", done, n), available)
	}
	return nil
}
