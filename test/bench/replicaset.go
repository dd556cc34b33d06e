package bench

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// oneReplicaSetWorkload creates one large ReplicaSet and waits until every pod is
// Ready.
func oneReplicaSetWorkload() workload {
	return workload{
		name: "one-replicaset",
		description: func(s Sizes) string {
			return fmt.Sprintf("one ReplicaSet of %d pods until every pod is Ready", s.OneReplicaSetPods)
		},
		run: func(ctx context.Context, e *env) error {
			n := e.cfg.Sizes.OneReplicaSetPods
			return e.phase(ctx, Phase{Name: "create to Ready", Objects: n},
				func(ctx context.Context) error { return createReplicaSets(ctx, e, "rs", 1, n) },
				func() error { return replicaSetsReady(e, 1, n) })
		},
	}
}

// manyReplicaSetsWorkload creates many small ReplicaSets at once and waits until every
// pod is Ready.
func manyReplicaSetsWorkload() workload {
	return workload{
		name: "many-replicasets",
		description: func(s Sizes) string {
			return fmt.Sprintf("%d ReplicaSets of %d pods, created at once, until every pod is Ready", s.ManyReplicaSets, s.ManyReplicaSetPods)
		},
		run: func(ctx context.Context, e *env) error {
			n, size := e.cfg.Sizes.ManyReplicaSets, e.cfg.Sizes.ManyReplicaSetPods
			return e.phase(ctx, Phase{Name: "create to Ready", Objects: n * size},
				func(ctx context.Context) error { return createReplicaSets(ctx, e, "rs", n, size) },
				func() error { return replicaSetsReady(e, n, size) })
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
