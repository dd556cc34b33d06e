package micro

import (
	"fmt"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/controllers/controllerref"
	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
	"github.com/mini-kcm/mini-kcm/controllers/endpoints/subsets"
	"github.com/mini-kcm/mini-kcm/controllers/podranking"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// template is the pod template of the end-to-end benchmarks.
func template(version string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env:   []corev1.EnvVar{{Name: "VERSION", Value: version}, {Name: "LOG_LEVEL", Value: "info"}},
		}}},
	}
}

// readyPods returns n Running, Ready pods spread over nodes, owned by owner, of
// staggered ages.
func readyPods(n, nodes int, owner *appsv1.ReplicaSet) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		created := metav1.NewTime(now.Add(-time.Duration(i) * time.Minute))
		t := template("1")
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "bench", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
				Labels: t.Labels, CreationTimestamp: created,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
			},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%nodes), Containers: t.Spec.Containers},
			Status: corev1.PodStatus{
				Phase:      corev1.PodRunning,
				PodIP:      fmt.Sprintf("10.244.%d.%d", i/250, i%250+1),
				PodIPs:     []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i/250, i%250+1)}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created}},
			},
		}
	}
	return pods
}

func replicaSet(name string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, UID: types.UID("uid-" + name)}}
}

// BenchmarkPodRankingSort1000 ranks the pods of a 1000-pod ReplicaSet for a
// scale-down, as the ReplicaSet controller does on every scale-down sync.
func BenchmarkPodRankingSort1000(b *testing.B) {
	pods := readyPods(1000, 10, replicaSet("rs"))
	candidates := make([]*corev1.Pod, len(pods))
	b.ReportAllocs()
	for b.Loop() {
		copy(candidates, pods)
		sort.Sort(podranking.RankByColocation(candidates, pods, metav1.NewTime(now)))
	}
}

// BenchmarkPodsControlledBy reads one ReplicaSet's 10 pods and the orphans of its
// namespace out of an index of 10000 pods, as every ReplicaSet sync does.
func BenchmarkPodsControlledBy(b *testing.B) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	if err := controllerref.AddPodControllerIndexer(informer); err != nil {
		b.Fatal(err)
	}
	indexer := informer.GetIndexer()
	var owner *appsv1.ReplicaSet
	for i := range 1000 {
		rs := replicaSet(fmt.Sprintf("rs-%d", i))
		if i == 500 {
			owner = rs
		}
		for _, pod := range readyPods(10, 10, rs) {
			pod.Name = rs.Name + "-" + pod.Name
			if err := indexer.Add(pod); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		pods, err := controllerref.PodsControlledBy(indexer, owner, "ReplicaSet", true)
		if err != nil || len(pods) != 10 {
			b.Fatalf("got %d pods, %v", len(pods), err)
		}
	}
}

// expandedSubsets is what the Endpoints controller builds before repacking: one subset
// per (pod, port), ready or not.
func expandedSubsets(n int) []corev1.EndpointSubset {
	out := make([]corev1.EndpointSubset, n)
	for i := range out {
		node := fmt.Sprintf("node-%d", i%10)
		addr := corev1.EndpointAddress{
			IP: fmt.Sprintf("10.244.%d.%d", i/250, i%250+1), NodeName: &node,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
		}
		out[i] = corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}
		if i%3 == 0 {
			out[i].NotReadyAddresses = []corev1.EndpointAddress{addr}
		} else {
			out[i].Addresses = []corev1.EndpointAddress{addr}
		}
	}
	return out
}

// BenchmarkEndpointsRepack packs the addresses of a Service's pods into canonical
// subsets, which the Endpoints controller does on every sync.
func BenchmarkEndpointsRepack(b *testing.B) {
	for _, n := range []int{20, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			expanded := expandedSubsets(n)
			b.ReportAllocs()
			for b.Loop() {
				subsets.Repack(expanded)
			}
		})
	}
}

// BenchmarkEndpointsUpToDate compares desired subsets with the cached ones, which
// decides whether a sync writes.
func BenchmarkEndpointsUpToDate(b *testing.B) {
	desired := subsets.Repack(expandedSubsets(1000))
	current := subsets.Repack(expandedSubsets(1000))
	b.ReportAllocs()
	for b.Loop() {
		if !subsets.EqualIgnoringResourceVersion(current, desired) {
			b.Fatal("equal subsets compare unequal")
		}
	}
}

// BenchmarkRolloutTemplateHash hashes a Deployment's pod template, which every
// Deployment sync does to name its new ReplicaSet.
func BenchmarkRolloutTemplateHash(b *testing.B) {
	t := template("1")
	b.ReportAllocs()
	for b.Loop() {
		rollout.ComputeHash(&t, nil)
	}
}

// BenchmarkRolloutFindNewReplicaSet finds the ReplicaSet matching a Deployment's
// template among its history of 10, as every Deployment sync does.
func BenchmarkRolloutFindNewReplicaSet(b *testing.B) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: template("10"), Replicas: ptr.To[int32](10)}}
	var history []*appsv1.ReplicaSet
	for i := range 10 {
		rs := replicaSet(fmt.Sprintf("rs-%d", i))
		rs.CreationTimestamp = metav1.NewTime(now.Add(time.Duration(i) * time.Minute))
		rs.Spec.Template = template(fmt.Sprint(i + 1))
		rs.Spec.Template.Labels = map[string]string{"app": "bench", appsv1.DefaultDeploymentUniqueLabelKey: fmt.Sprint(i)}
		history = append(history, rs)
	}
	b.ReportAllocs()
	for b.Loop() {
		if rollout.FindNewReplicaSet(d, history) == nil {
			b.Fatal("no new ReplicaSet found")
		}
	}
}

// BenchmarkRolloutNewReplicas computes how far a rolling update may scale the new
// ReplicaSet up.
func BenchmarkRolloutNewReplicas(b *testing.B) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](100),
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}},
	}}
	d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstrPercent("25%"))
	d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstrPercent("25%"))
	oldRS, newRS := replicaSet("old"), replicaSet("new")
	oldRS.Spec.Replicas, newRS.Spec.Replicas = ptr.To[int32](80), ptr.To[int32](40)
	all := []*appsv1.ReplicaSet{oldRS, newRS}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rollout.NewRSNewReplicas(d, all, newRS); err != nil {
			b.Fatal(err)
		}
	}
}
