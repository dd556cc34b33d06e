package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// BenchmarkWeighingThePods measures what the shard coordinator's weighing costs, once
// per --shard-rebalance-period: the paged metadata list of every pod
// (sharding.WeighPods), at 30 000 pods in 100 namespaces (WEIGH_PODS=N for another
// count). It reports the wall time of one weighing and the CPU the apiserver (and
// etcd) spent on it, from /proc, so that the period's default can be set from its
// share of a core. make bench runs it.
func BenchmarkWeighingThePods(b *testing.B) {
	pods := 30000
	if v, err := strconv.Atoi(os.Getenv("WEIGH_PODS")); err == nil && v > 0 {
		pods = v
	}
	const namespaces = 100
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: b.Logf})
	if err != nil {
		b.Fatalf("starting the control plane: %v", err)
	}
	defer cp.Stop()
	config := cp.RESTConfig()
	config.QPS, config.Burst = -1, 0
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		b.Fatal(err)
	}
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		b.Fatal(err)
	}
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-%03d", i)}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	begin := time.Now()
	err = parallel(ctx, pods, 32, func(ctx context.Context, i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Labels: map[string]string{"app": "weigh"}},
			Spec:       podTemplate(map[string]string{"app": "weigh"}, "1").Spec,
		}
		_, err := client.CoreV1().Pods(fmt.Sprintf("tenant-%03d", i%namespaces)).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("creating %d pods: %v", pods, err)
	}
	b.Logf("%d pods created in %s", pods, time.Since(begin).Round(time.Second))
	weigh := sharding.WeighPods(meta)
	// The first list fills nothing the later ones reuse (the apiserver serves them from
	// its watch cache either way), but it warms the client's connection.
	if _, err := weigh(ctx); err != nil {
		b.Fatal(err)
	}
	usage := func() time.Duration {
		var total time.Duration
		for _, name := range []string{controlplane.KubeAPIServer, controlplane.Etcd} {
			u, err := readProcessUsage(cp.Pid(name))
			if err != nil {
				b.Fatal(err)
			}
			total += u.CPU
		}
		return total
	}
	before := usage()
	b.ResetTimer()
	for b.Loop() {
		weights, err := weigh(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var counted int64
		for _, w := range weights {
			counted += w
		}
		if counted != int64(pods) {
			b.Fatalf("weighed %d pods, want %d", counted, pods)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(usage()-before)/float64(b.N)/float64(time.Millisecond), "apiserver-cpu-ms/op")
}
