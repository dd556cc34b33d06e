package bench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ceilingNamespace holds the plain client's pods.
const ceilingNamespace = "bench-ceiling"

// ceilingUser is the identity of the plain client in the audit log.
const ceilingUser = "bench-plain-client"

// ceilingWorkload compares the controller manager's pod creation rate, with its client
// rate limit lifted, to what a plain client-go program achieves against the same
// control plane: first the plain client creates the pods from many goroutines with no
// rate limit (and they are deleted again), then the controller manager starts and
// creates the same number of pods for one ReplicaSet.
func ceilingWorkload() workload {
	return workload{
		name:   "ceiling",
		lifted: true,
		description: func(s Sizes) string {
			return fmt.Sprintf("%d pods created by a plain client-go program (no rate limit), then by one ReplicaSet "+
				"with the controller manager's rate limit lifted", s.CeilingPods)
		},
		prepare: func(ctx context.Context, e *env) error {
			rate, err := measurePlainClient(ctx, e, e.cfg.Sizes.CeilingPods)
			if err != nil {
				return fmt.Errorf("measuring the plain client: %w", err)
			}
			e.ceilingPodsPerSecond = rate
			return nil
		},
		run: func(ctx context.Context, e *env) error {
			n := e.cfg.Sizes.CeilingPods
			p := Phase{Name: "create to Ready, rate limit lifted", Objects: n, CeilingPodsPerSecond: e.ceilingPodsPerSecond}
			return e.phase(ctx, p,
				func(ctx context.Context) error { return createReplicaSets(ctx, e, "ceiling", 1, n) },
				func() error { return replicaSetsReady(e, 1, n) })
		},
	}
}

// measurePlainClient measures how fast a client-go program creates n pods from
// Config.CeilingWorkers goroutines through a client with no rate limit, as the
// apiserver's audit log shows it. A warm-up round of a tenth of the pods comes first
// (a fresh apiserver is slower for its first requests), then the measured round of n.
// After each round the pods are deleted again, once they all ran.
func measurePlainClient(ctx context.Context, e *env, n int) (float64, error) {
	kubeconfig, err := e.cp.AddUser(ceilingUser, "system:masters")
	if err != nil {
		return 0, err
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, err
	}
	restConfig.QPS, restConfig.Burst = -1, 0
	restConfig.UserAgent = ceilingUser
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return 0, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ceilingNamespace}}
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("creating namespace %s: %w", ceilingNamespace, err)
	}
	cursor := &auditCursor{path: e.cp.AuditLogPath()}
	if _, err := plainClientRound(ctx, e, client, cursor, 0, max(50, n/10)); err != nil {
		return 0, fmt.Errorf("warm-up round: %w", err)
	}
	rate, err := plainClientRound(ctx, e, client, cursor, 1, n)
	if err != nil {
		return 0, err
	}
	e.cfg.Logf("   plain client: %.0f pods/s", rate)
	return rate, nil
}

// plainClientRound creates count pods, returns their creation rate, and removes them
// once they all ran, so that the next round and the controller manager start on a
// quiet control plane.
func plainClientRound(ctx context.Context, e *env, client kubernetes.Interface, cursor *auditCursor, round, count int) (float64, error) {
	if _, err := cursor.next(ceilingUser); err != nil {
		return 0, err
	}
	template := podTemplate(map[string]string{"app": "ceiling"}, "1")
	err := parallel(ctx, count, e.cfg.CeilingWorkers, func(ctx context.Context, i int) error {
		pod := &corev1.Pod{ObjectMeta: template.ObjectMeta, Spec: template.Spec}
		pod.Name = fmt.Sprintf("ceiling-%d-%d", round, i)
		_, err := client.CoreV1().Pods(ceilingNamespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return 0, err
	}
	// The audit log has the last request once its response was sent; give the
	// apiserver a moment to write it.
	time.Sleep(time.Second)
	requests, err := cursor.next(ceilingUser)
	if err != nil {
		return 0, err
	}
	pods, seconds := creationRate(requests)
	if pods != count || seconds <= 0 {
		return 0, fmt.Errorf("the audit log shows %d pod creates of %d", pods, count)
	}

	countPods := func(ready bool) (int, error) {
		list, err := e.client.CoreV1().Pods(ceilingNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		c := 0
		for i := range list.Items {
			if !ready || podReady(&list.Items[i]) {
				c++
			}
		}
		return c, nil
	}
	if err := waitFor(ctx, e.cfg.PhaseTimeout, func() error {
		ready, err := countPods(true)
		if err != nil {
			return err
		}
		return progressOrNil("plain client's pods Ready", ready, count)
	}); err != nil {
		return 0, err
	}
	if err := e.client.CoreV1().Pods(ceilingNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return 0, fmt.Errorf("deleting the plain client's pods: %w", err)
	}
	if err := waitFor(ctx, e.cfg.PhaseTimeout, func() error {
		left, err := countPods(false)
		if err != nil {
			return err
		}
		return progressOrNil("plain client's pods gone", count-left, count)
	}); err != nil {
		return 0, err
	}
	return float64(pods) / seconds, nil
}

// waitFor polls check every 200ms until it returns nil or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not done after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
