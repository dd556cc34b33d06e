package cacheintern

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// replicaSetPod is pod i of ReplicaSet rs on node i%3, whole as the apiserver serves
// it.
func replicaSetPod(rs string, i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: string([]byte("ns")), Name: fmt.Sprintf("%s-%d", rs, i), GenerateName: rs + "-",
			UID: types.UID(fmt.Sprintf("uid-%s-%d", rs, i)), ResourceVersion: fmt.Sprint(i),
			Labels:          map[string]string{"app": "web", "pod-template-hash": rs},
			Annotations:     map[string]string{"controller.kubernetes.io/pod-deletion-cost": "5"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("uid-" + rs), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: v1.PodSpec{
			NodeName: fmt.Sprintf("node-%d", i%3), Hostname: "h", Subdomain: "s",
			Containers: []v1.Container{{Name: "app", Image: "pause", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}}},
		},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.Unix(int64(i), 0)}},
			PodIP:      fmt.Sprintf("10.0.0.%d", i), PodIPs: []v1.PodIP{{IP: fmt.Sprintf("10.0.0.%d", i)}},
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", Ready: true, RestartCount: int32(i % 2),
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Unix(int64(i), 0)}},
			}},
		},
	}
}

func trimmed(t *testing.T, pod *v1.Pod) *v1.Pod {
	t.Helper()
	trimmer, err := cachetrim.NewTrimmer(all.Registry().PodReads())
	if err != nil {
		t.Fatal(err)
	}
	trimmer.Trim(pod)
	return pod
}

// An interned pod reads the same as before, every declared field included: the
// Interner only swaps copies.
func TestInternedPodsReadTheSame(t *testing.T) {
	in := New()
	for _, trim := range []bool{false, true} {
		for i := range 20 {
			pod := replicaSetPod(fmt.Sprintf("rs-%d", i%4), i)
			if trim {
				pod = trimmed(t, pod)
			}
			want := pod.DeepCopy()
			in.Pod(pod)
			if !equality.Semantic.DeepEqual(pod, want) {
				t.Fatalf("trimmed=%v: interning changed pod %d:\n got %+v\nwant %+v", trim, i, pod, want)
			}
		}
	}
}

// Pods of one ReplicaSet share their labels, owner references and containers, and the
// Ready pods that never restarted their container statuses; pods of another
// ReplicaSet do not share its labels or owner.
func TestPodsOfOneReplicaSetShareWhatTheyHoldAlike(t *testing.T) {
	in := New()
	a0, a1, a2 := trimmed(t, replicaSetPod("a", 0)), trimmed(t, replicaSetPod("a", 2)), trimmed(t, replicaSetPod("a", 1))
	b0 := trimmed(t, replicaSetPod("b", 0))
	for _, pod := range []*v1.Pod{a0, a1, a2, b0} {
		in.Pod(pod)
	}
	same := func(what string, x, y any, want bool) {
		t.Helper()
		if got := reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer(); got != want {
			t.Errorf("%s shared: %v, want %v", what, got, want)
		}
	}
	same("labels of a0 and a1", a0.Labels, a1.Labels, true)
	same("owners of a0 and a1", a0.OwnerReferences, a1.OwnerReferences, true)
	same("containers of a0 and b0", a0.Spec.Containers, b0.Spec.Containers, true)
	same("statuses of a0 and a1 (restartCount 0)", a0.Status.ContainerStatuses, a1.Status.ContainerStatuses, true)
	same("statuses of a0 and a2 (restartCount 1)", a0.Status.ContainerStatuses, a2.Status.ContainerStatuses, false)
	same("labels of a0 and b0", a0.Labels, b0.Labels, false)
	same("owners of a0 and b0", a0.OwnerReferences, b0.OwnerReferences, false)
	same("pod IPs of a0 and a1", a0.Status.PodIPs, a1.Status.PodIPs, false)
	if unsafe.StringData(a0.Namespace) != unsafe.StringData(b0.Namespace) {
		t.Error("the namespaces of a0 and b0 are not one string")
	}
}

// A DeepCopy of an interned pod, which a controller makes before changing it, shares
// nothing with the cache.
func TestDeepCopyOfAnInternedPodSharesNothing(t *testing.T) {
	in := New()
	first, second := replicaSetPod("a", 0), replicaSetPod("a", 2)
	in.Pod(first)
	in.Pod(second)
	changed := second.DeepCopy()
	changed.Labels["app"] = "other"
	changed.OwnerReferences[0].Name = "other"
	changed.Spec.Containers[0].Name = "other"
	if first.Labels["app"] != "web" || first.OwnerReferences[0].Name != "a" || first.Spec.Containers[0].Name != "app" {
		t.Errorf("changing a copy of one pod changed another: %+v", first)
	}
}

// A table that reaches its bound starts again; pods keep what they were given.
func TestAFullTableStartsAgain(t *testing.T) {
	in := New()
	var pods []*v1.Pod
	for i := range maxEntries + 10 {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"n": fmt.Sprint(i)}}}
		in.Pod(pod)
		pods = append(pods, pod)
	}
	if n := len(in.labels.m); n > maxEntries {
		t.Errorf("the labels table holds %d entries, more than %d", n, maxEntries)
	}
	for i, pod := range pods {
		if pod.Labels["n"] != fmt.Sprint(i) {
			t.Fatalf("pod %d has labels %v", i, pod.Labels)
		}
	}
}

// BenchmarkInternPod interns a trimmed pod of a ReplicaSet seen before, the common
// case: what the informers' transform adds to every pod event.
func BenchmarkInternPod(b *testing.B) {
	trimmer, err := cachetrim.NewTrimmer(all.Registry().PodReads())
	if err != nil {
		b.Fatal(err)
	}
	in := New()
	pods := make([]*v1.Pod, 100)
	for i := range pods {
		pods[i] = replicaSetPod("rs", i)
		trimmer.Trim(pods[i])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		in.Pod(pods[i%len(pods)])
		i++
	}
}
