package bench

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// replicaSetWorkload creates count ReplicaSets of size pods each and waits until every
// pod is Ready. scaleCount says whether the scale multiplies the number of
// ReplicaSets (many small ones) or their size (one big one).
func replicaSetWorkload(name string, count, size int, scaleCount bool) workload {
	sizes := func(scale float64) (int, int) {
		if scaleCount {
			return scaledSize(count, scale), size
		}
		return count, scaledSize(size, scale)
	}
	return workload{
		name: name,
		description: func(scale float64) string {
			n, s := sizes(scale)
			return fmt.Sprintf("%d ReplicaSet(s) of %d pods, created at once, until every pod is Ready", n, s)
		},
		run: func(ctx context.Context, e *env) error {
			n, s := sizes(e.cfg.Scale)
			return e.phase(ctx, Phase{Name: "create to Ready", Objects: n * s},
				func(ctx context.Context) error { return createReplicaSets(ctx, e, "rs", n, s) },
				func() error { return replicaSetsReady(e, n, s) })
		},
	}
}

// createReplicaSets creates n ReplicaSets named prefix-<i> of size replicas.
func createReplicaSets(ctx context.Context, e *env, prefix string, n, size int) error {
	return parallel(ctx, n, 20, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("%s-%d", prefix, i)
		labels := map[string]string{"app": name}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To(int32(size)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: podTemplate(labels, "1"),
			},
		}
		if _, err := e.client.AppsV1().ReplicaSets(benchNamespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ReplicaSet %s: %w", name, err)
		}
		return nil
	})
}

// replicaSetsReady checks that n ReplicaSets report size Ready and available
// replicas for their current generation.
func replicaSetsReady(e *env, n, size int) error {
	replicaSets, err := e.replicaSets.List(everything)
	if err != nil {
		return err
	}
	if len(replicaSets) < n {
		return progress("ReplicaSets in the cache", len(replicaSets), n)
	}
	done, ready := 0, 0
	for _, rs := range replicaSets {
		ready += int(rs.Status.ReadyReplicas)
		if rs.Status.ObservedGeneration >= rs.Generation && int(rs.Status.Replicas) == size &&
			int(rs.Status.ReadyReplicas) == size && int(rs.Status.AvailableReplicas) == size {
			done++
		}
	}
	if done < n {
		return fmt.Errorf("%w (%d of %d pods Ready)", progress("ReplicaSets done", done, n), ready, n*size)
	}
	return nil
}
