package cachetrim

import (
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/controllers/podranking"
	"github.com/mini-kcm/mini-kcm/controllers/podstate"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fullPod is a pod as a kubelet reports it, with every field a controller reads and
// plenty that none does.
func fullPod(name string, age time.Duration, ready bool, restarts int32, cost string) *v1.Pod {
	created := metav1.NewTime(now.Add(-age))
	readyStatus := v1.ConditionFalse
	if ready {
		readyStatus = v1.ConditionTrue
	}
	annotations := map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"a":"very long document"}`,
		"prometheus.io/scrape":                             "true",
	}
	if cost != "" {
		annotations[podranking.DeletionCostAnnotation] = cost
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42",
			Labels:            map[string]string{"app": "web"},
			Annotations:       annotations,
			CreationTimestamp: created,
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}},
			Finalizers:        []string{"example.com/keep"},
		},
		Spec: v1.PodSpec{
			NodeName: "node-1", Hostname: "web-0", Subdomain: "web",
			InitContainers: []v1.Container{
				{Name: "setup", Image: "busybox", Command: []string{"sh", "-c", "true"}},
				{Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
					Ports: []v1.ContainerPort{{Name: "admin", ContainerPort: 9901, Protocol: v1.ProtocolTCP}}},
			},
			Containers: []v1.Container{{
				Name: "app", Image: "registry.k8s.io/app:1", Args: []string{"--serve"},
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
				Env:   []v1.EnvVar{{Name: "VERSION", Value: "1"}},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"),
				}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}},
				VolumeMounts:   []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes:       []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Tolerations:   []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists}},
			SchedulerName: "default-scheduler",
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			Conditions: []v1.PodCondition{
				{Type: v1.PodScheduled, Status: v1.ConditionTrue},
				{Type: v1.PodReady, Status: readyStatus, LastTransitionTime: created, Reason: "r", Message: "m"},
			},
			HostIP: "10.240.0.1", PodIP: "10.244.0.5",
			PodIPs:    []v1.PodIP{{IP: "10.244.0.5"}, {IP: "fd00::5"}},
			StartTime: &created,
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", Ready: ready, RestartCount: restarts, Image: "registry.k8s.io/app:1", ImageID: "sha256:abc",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: created}},
			}},
			InitContainerStatuses: []v1.ContainerStatus{
				{Name: "setup", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "proxy", Ready: true, RestartCount: restarts + 1},
			},
			QOSClass: v1.PodQOSBurstable,
		},
	}
}

func TestTrimKeepsWhatControllersRead(t *testing.T) {
	original := fullPod("web-0", time.Hour, true, 3, "-5")
	pod := original.DeepCopy()
	trimmer.Trim(pod)

	// Metadata stays whole but for annotations other than the deletion cost.
	wantMeta := original.ObjectMeta.DeepCopy()
	wantMeta.Annotations = map[string]string{podranking.DeletionCostAnnotation: "-5"}
	if !equality.Semantic.DeepEqual(pod.ObjectMeta, *wantMeta) {
		t.Errorf("metadata:\n got %+v\nwant %+v", pod.ObjectMeta, *wantMeta)
	}
	want := v1.Pod{
		Spec: v1.PodSpec{
			NodeName: "node-1", Hostname: "web-0", Subdomain: "web",
			InitContainers: []v1.Container{
				{Name: "setup"},
				{Name: "proxy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
					Ports: []v1.ContainerPort{{Name: "admin", ContainerPort: 9901, Protocol: v1.ProtocolTCP}}},
			},
			Containers: []v1.Container{{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}}},
		},
		Status: v1.PodStatus{
			Phase:             v1.PodRunning,
			Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: original.CreationTimestamp}},
			PodIP:             "10.244.0.5",
			PodIPs:            []v1.PodIP{{IP: "10.244.0.5"}, {IP: "fd00::5"}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 3}},
			InitContainerStatuses: []v1.ContainerStatus{
				{Name: "setup"},
				{Name: "proxy", Ready: true, RestartCount: 4},
			},
		},
	}
	if !equality.Semantic.DeepEqual(pod.Spec, want.Spec) {
		t.Errorf("spec:\n got %+v\nwant %+v", pod.Spec, want.Spec)
	}
	if !equality.Semantic.DeepEqual(pod.Status, want.Status) {
		t.Errorf("status:\n got %+v\nwant %+v", pod.Status, want.Status)
	}
}

func TestTrimDropsAnnotationsWithoutDeletionCost(t *testing.T) {
	pod := fullPod("web-0", time.Hour, true, 0, "")
	trimmer.Trim(pod)
	if pod.Annotations != nil {
		t.Errorf("annotations = %v, want none", pod.Annotations)
	}
}

func TestTrimmedPodsRankAndReadTheSame(t *testing.T) {
	var full []*v1.Pod
	for i, p := range []struct {
		age      time.Duration
		ready    bool
		restarts int32
		cost     string
	}{
		{time.Hour, true, 0, ""}, {time.Minute, true, 0, ""}, {time.Hour, false, 0, ""},
		{2 * time.Hour, true, 5, ""}, {time.Hour, true, 0, "-10"}, {time.Second, true, 1, "3"},
	} {
		full = append(full, fullPod(string(rune('a'+i)), p.age, p.ready, p.restarts, p.cost))
	}
	full[1].Spec.NodeName = ""
	full[3].Status.Phase = v1.PodPending

	trimmed := make([]*v1.Pod, len(full))
	for i, p := range full {
		trimmed[i] = p.DeepCopy()
		trimmer.Trim(trimmed[i])
		for _, minReady := range []int32{0, 30, 3600} {
			if podstate.IsAvailable(p, minReady, metav1.NewTime(now)) != podstate.IsAvailable(trimmed[i], minReady, metav1.NewTime(now)) {
				t.Errorf("pod %s: availability (minReadySeconds %d) changed by trimming", p.Name, minReady)
			}
		}
		if podstate.IsReady(p) != podstate.IsReady(trimmed[i]) || podstate.IsActive(p) != podstate.IsActive(trimmed[i]) ||
			!podstate.ReadyTime(p).Time.Equal(podstate.ReadyTime(trimmed[i]).Time) || podranking.DeletionCost(p) != podranking.DeletionCost(trimmed[i]) {
			t.Errorf("pod %s: state read differently after trimming", p.Name)
		}
	}
	names := func(pods []*v1.Pod) []string {
		sorted := append([]*v1.Pod(nil), pods...)
		sort.Sort(podranking.RankByColocation(sorted, sorted, metav1.NewTime(now)))
		var out []string
		for _, p := range sorted {
			out = append(out, p.Name)
		}
		return out
	}
	if got, want := names(trimmed), names(full); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("scale-down order of trimmed pods %v, of full pods %v", got, want)
	}
}
