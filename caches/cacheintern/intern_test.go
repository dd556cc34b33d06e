package cacheintern

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
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

// A generation that reaches its bound ends; pods keep what they were given.
func TestAFullTableStartsAgain(t *testing.T) {
	in := New()
	var pods []*v1.Pod
	for i := range maxEntries + 10 {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"n": fmt.Sprint(i)}}}
		in.Pod(pod)
		pods = append(pods, pod)
	}
	if n := len(in.labels.young); n > maxEntries {
		t.Errorf("the labels table's young generation holds %d entries, more than %d", n, maxEntries)
	}
	if n := in.labels.len(); n > 2*maxEntries {
		t.Errorf("the labels table holds %d entries, more than two generations of %d", n, maxEntries)
	}
	for i, pod := range pods {
		if pod.Labels["n"] != fmt.Sprint(i) {
			t.Fatalf("pod %d has labels %v", i, pod.Labels)
		}
	}
}

// Owners and templates that are gone (every finished Job, every replaced ReplicaSet)
// leave the tables after two generations, while a ReplicaSet whose pods keep coming
// stays shared across them.
func TestChurnedOwnersAreForgotten(t *testing.T) {
	in := New()
	now := time.Now()
	in.now = func() time.Time { return now }
	const churned = 5000
	runtime.GC()
	var before, filled, after runtime.MemStats
	runtime.ReadMemStats(&before)
	live := replicaSetPod("live", 0)
	in.Pod(live)
	for r := range churned {
		for i := range 2 {
			in.Pod(replicaSetPod(fmt.Sprintf("gone-%05d", r), i))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&filled)
	if n := in.owners.len(); n != churned+1 {
		t.Fatalf("the owners table holds %d entries after %d ReplicaSets, want %d", n, churned, churned+1)
	}
	var pods []*v1.Pod
	for g := 1; g <= 2; g++ {
		now = now.Add(generation)
		for i := range agingCheck {
			pod := replicaSetPod("live", g*agingCheck+i)
			in.Pod(pod)
			pods = append(pods, pod)
		}
	}
	pods = []*v1.Pod{pods[agingCheck-1], pods[len(pods)-1]}
	runtime.GC()
	runtime.ReadMemStats(&after)
	remembered := func(name string, young, old []string) {
		t.Helper()
		for _, key := range append(young, old...) {
			if strings.Contains(key, "gone-") {
				t.Errorf("the %s table remembers %q two generations after its ReplicaSet went", name, key)
				return
			}
		}
	}
	remembered("strings", slices.Collect(maps.Keys(in.strings.young)), slices.Collect(maps.Keys(in.strings.old)))
	remembered("labels", slices.Collect(maps.Keys(in.labels.young)), slices.Collect(maps.Keys(in.labels.old)))
	remembered("owners", slices.Collect(maps.Keys(in.owners.young)), slices.Collect(maps.Keys(in.owners.old)))
	if reflect.ValueOf(pods[0].Labels).UnsafePointer() != reflect.ValueOf(pods[1].Labels).UnsafePointer() ||
		reflect.ValueOf(live.Labels).UnsafePointer() != reflect.ValueOf(pods[1].Labels).UnsafePointer() {
		t.Error("the labels of a ReplicaSet interned in every generation are not shared across them")
	}
	t.Logf("%d ReplicaSets of 2 pods: the tables held %.1f MB; two generations later, %.1f MB",
		churned, float64(int64(filled.HeapAlloc)-int64(before.HeapAlloc))/1e6, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1e6)
	runtime.KeepAlive(in)
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
