package podranking

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var (
	now        = metav1.NewTime(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	then1Month = metav1.Time{Time: now.AddDate(0, -1, 0)}
	then2Hours = metav1.Time{Time: now.Add(-2 * time.Hour)}
	then5Hours = metav1.Time{Time: now.Add(-5 * time.Hour)}
	then8Hours = metav1.Time{Time: now.Add(-8 * time.Hour)}
	zeroTime   = metav1.Time{}
)

func pod(name, node string, phase v1.PodPhase, ready bool, restarts, sidecarRestarts int32, readySince, created metav1.Time, cost string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: created},
		Spec: v1.PodSpec{
			NodeName:       node,
			InitContainers: []v1.Container{{Name: "sidecar", RestartPolicy: &always}},
		},
		Status: v1.PodStatus{Phase: phase},
	}
	if ready {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: readySince}}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{RestartCount: restarts}}
		p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "sidecar", RestartCount: sidecarRestarts}}
	}
	if cost != "" {
		p.Annotations = map[string]string{DeletionCostAnnotation: cost}
	}
	return p
}

var (
	unscheduled           = pod("unscheduled", "", v1.PodPending, false, 0, 0, zeroTime, zeroTime, "")
	scheduledPending      = pod("pending", "node", v1.PodPending, false, 0, 0, zeroTime, zeroTime, "")
	unknownPhase          = pod("unknown-phase", "node", v1.PodUnknown, false, 0, 0, zeroTime, zeroTime, "")
	runningNotReady       = pod("not-ready", "node", v1.PodRunning, false, 0, 0, zeroTime, zeroTime, "")
	readyNoTransitionTime = pod("ready-no-last-transition-time", "node", v1.PodRunning, true, 0, 0, zeroTime, zeroTime, "")
	readyNow              = pod("ready-now", "node", v1.PodRunning, true, 0, 0, now, now, "")
	readyThen             = pod("ready-then", "node", v1.PodRunning, true, 0, 0, then1Month, then1Month, "")
	readyHighRestarts     = pod("ready-high-restarts", "node", v1.PodRunning, true, 9001, 0, now, now, "")
	readyHighSidecar      = pod("ready-high-sidecar-restarts", "node", v1.PodRunning, true, 9001, 9001, now, now, "")
	readyNowCreatedThen   = pod("ready-now-created-then", "node", v1.PodRunning, true, 0, 0, now, then1Month, "")
	lowDeletionCost       = pod("low-deletion-cost", "node", v1.PodRunning, true, 0, 0, now, then1Month, "10")
	highDeletionCost      = pod("high-deletion-cost", "node", v1.PodRunning, true, 0, 0, now, then1Month, "100")
	unscheduled5Hours     = pod("unscheduled-5-hours", "", v1.PodPending, false, 0, 0, then5Hours, then5Hours, "")
	unscheduled8Hours     = pod("unscheduled-8-hours", "", v1.PodPending, false, 0, 0, then8Hours, then8Hours, "")
	ready2Hours           = pod("ready-2-hours", "", v1.PodRunning, true, 0, 0, then2Hours, then1Month, "")
	ready5Hours           = pod("ready-5-hours", "", v1.PodRunning, true, 0, 0, then5Hours, then1Month, "")
	ready8Hours           = pod("ready-8-hours", "", v1.PodRunning, true, 0, 0, then8Hours, then1Month, "")
)

func TestPodsThatCompareEqualAreNotOrdered(t *testing.T) {
	tests := []struct{ p1, p2 *v1.Pod }{
		{unscheduled, unscheduled},
		{scheduledPending, scheduledPending},
		{unknownPhase, unknownPhase},
		{runningNotReady, runningNotReady},
		{readyNow, readyNow},
		{readyThen, readyThen},
		{readyHighRestarts, readyHighRestarts},
		{readyNowCreatedThen, readyNowCreatedThen},
	}
	for _, tt := range tests {
		t.Run(tt.p1.Name, func(t *testing.T) {
			s := ActivePodsWithRanks{Pods: []*v1.Pod{tt.p1, tt.p2}, Rank: []int{1, 1}, Now: now}
			if s.Less(0, 1) || s.Less(1, 0) {
				t.Errorf("expected %q to compare equal to itself", tt.p1.Name)
			}
		})
	}
}

func TestPodsOfTheSameAgeBucketAreOrderedByUID(t *testing.T) {
	// 5 and 8 hours fall into the same log2 bucket of nanoseconds, so the UID decides,
	// consistently in both directions.
	for _, pair := range [][2]*v1.Pod{{unscheduled5Hours, unscheduled8Hours}, {ready5Hours, ready8Hours}} {
		s := ActivePodsWithRanks{Pods: []*v1.Pod{pair[0], pair[1]}, Rank: []int{1, 1}, Now: now}
		if s.Less(0, 1) == s.Less(1, 0) {
			t.Errorf("%q and %q: want exactly one to come first", pair[0].Name, pair[1].Name)
		}
		if want := pair[0].UID < pair[1].UID; s.Less(0, 1) != want {
			t.Errorf("%q before %q = %v, want UID order %v", pair[0].Name, pair[1].Name, s.Less(0, 1), want)
		}
	}
}

func TestDeletionOrderRules(t *testing.T) {
	type ranked struct {
		pod  *v1.Pod
		rank int
	}
	tests := []struct {
		name          string
		first, second ranked
	}{
		{"unscheduled before scheduled despite lower rank", ranked{unscheduled, 1}, ranked{scheduledPending, 2}},
		{"unscheduled before scheduled", ranked{unscheduled, 2}, ranked{scheduledPending, 1}},
		{"pending before unknown", ranked{scheduledPending, 1}, ranked{unknownPhase, 2}},
		{"unknown before running", ranked{unknownPhase, 1}, ranked{runningNotReady, 2}},
		{"not ready before ready", ranked{runningNotReady, 1}, ranked{readyNoTransitionTime, 1}},
		{"ready without transition time before ready now", ranked{readyNoTransitionTime, 1}, ranked{readyNow, 1}},
		{"higher rank before ready without transition time", ranked{readyNow, 2}, ranked{readyNoTransitionTime, 1}},
		{"ready for less time first", ranked{readyNow, 1}, ranked{readyThen, 1}},
		{"higher rank before ready for longer", ranked{readyNow, 2}, ranked{readyThen, 1}},
		{"more restarts first", ranked{readyHighRestarts, 1}, ranked{readyNow, 1}},
		{"more sidecar restarts first", ranked{readyHighSidecar, 1}, ranked{readyHighRestarts, 1}},
		{"higher rank before more restarts", ranked{readyNow, 2}, ranked{readyHighRestarts, 1}},
		{"newer first", ranked{readyNow, 1}, ranked{readyNowCreatedThen, 1}},
		{"higher rank before newer", ranked{readyNowCreatedThen, 2}, ranked{readyNow, 1}},
		{"lower deletion cost before higher rank", ranked{lowDeletionCost, 1}, ranked{highDeletionCost, 2}},
		{"lower deletion cost first", ranked{lowDeletionCost, 2}, ranked{highDeletionCost, 1}},
		{"ready 2 hours before ready 5 hours", ranked{ready2Hours, 1}, ranked{ready5Hours, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ActivePodsWithRanks{
				Pods: []*v1.Pod{tt.first.pod, tt.second.pod},
				Rank: []int{tt.first.rank, tt.second.rank},
				Now:  now,
			}
			if !s.Less(0, 1) {
				t.Errorf("want %q (rank %d) before %q (rank %d)", tt.first.pod.Name, tt.first.rank, tt.second.pod.Name, tt.second.rank)
			}
			if s.Less(1, 0) {
				t.Errorf("want %q (rank %d) not before %q (rank %d)", tt.second.pod.Name, tt.second.rank, tt.first.pod.Name, tt.first.rank)
			}
		})
	}
}

// With PodDeletionCost off upstream skips the cost rule and the rules after it decide.
func TestDeletionCostIsIgnoredWhenItsGateIsOff(t *testing.T) {
	cheapOld := pod("cheap-old", "node", v1.PodRunning, true, 0, 0, then1Month, then1Month, "-100")
	costlyNew := pod("costly-new", "node", v1.PodRunning, true, 0, 0, now, now, "100")
	tests := []struct {
		name               string
		ignoreDeletionCost bool
		wantFirst          *v1.Pod
	}{
		{"gate on: the cheaper pod goes first", false, cheapOld},
		{"gate off: the pod ready for less time goes first", true, costlyNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ActivePodsWithRanks{Pods: []*v1.Pod{cheapOld, costlyNew}, Rank: []int{1, 1}, Now: now, IgnoreDeletionCost: tt.ignoreDeletionCost}
			sort.Sort(s)
			if s.Pods[0] != tt.wantFirst {
				t.Errorf("order %v, want %q first", podNames(s.Pods), tt.wantFirst.Name)
			}
		})
	}
}

func TestSortingPutsTheCheapestPodsFirst(t *testing.T) {
	negativeCost := pod("negative-deletion-cost", "node", v1.PodRunning, true, 0, 0, then1Month, then1Month, "-1")
	// A pod without the annotation costs 0, so the pod costing 10 goes last.
	want := []*v1.Pod{unscheduled, scheduledPending, unknownPhase, runningNotReady, negativeCost, readyNow, readyThen, lowDeletionCost}
	for seed := range int64(5) {
		pods := append([]*v1.Pod(nil), want...)
		rand.New(rand.NewSource(seed)).Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		sort.Sort(RankByColocation(pods, nil, now))
		if !reflect.DeepEqual(podNames(pods), podNames(want)) {
			t.Errorf("seed %d: order %v, want %v", seed, podNames(pods), podNames(want))
		}
	}
}

func TestRankByColocationCountsActiveRelatedPodsPerNode(t *testing.T) {
	onNode := func(name, node string, phase v1.PodPhase, deleting bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node}, Status: v1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	a1 := onNode("a1", "node-a", v1.PodRunning, false)
	b1 := onNode("b1", "node-b", v1.PodRunning, false)
	related := []*v1.Pod{
		a1, b1,
		onNode("a2", "node-a", v1.PodRunning, false),
		onNode("a3", "node-a", v1.PodPending, false),
		onNode("a-failed", "node-a", v1.PodFailed, false),
		onNode("a-deleting", "node-a", v1.PodRunning, true),
	}
	ranked := RankByColocation([]*v1.Pod{a1, b1}, related, now)
	if !reflect.DeepEqual(ranked.Rank, []int{3, 1}) {
		t.Errorf("ranks %v, want [3 1]: only active pods count", ranked.Rank)
	}
	sort.Sort(ranked)
	if ranked.Pods[0] != a1 || ranked.Rank[0] != 3 {
		t.Errorf("the doubled-up pod should come first with its rank, got %v %v", podNames(ranked.Pods), ranked.Rank)
	}
}

func TestDeletionCostParsesOnlyCanonicalInt32(t *testing.T) {
	tests := map[string]int32{
		"":            0,
		"10":          10,
		"-10":         -10,
		"0":           0,
		"+10":         0,
		"010":         0,
		"abc":         0,
		"2147483647":  2147483647,
		"2147483648":  0,
		"-2147483648": -2147483648,
	}
	for value, want := range tests {
		p := &v1.Pod{}
		if value != "" {
			p.Annotations = map[string]string{DeletionCostAnnotation: value}
		}
		if got := DeletionCost(p); got != want {
			t.Errorf("DeletionCost(%q) = %d, want %d", value, got, want)
		}
	}
}

func podNames(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = fmt.Sprint(p.Name)
	}
	return out
}
