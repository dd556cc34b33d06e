package rollout

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestFindNewAndOldReplicaSetsPreferTheOldestMatch(t *testing.T) {
	d := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Template = template("v2")
	matchNewer := replicaSet("match-newer", 1, 5)
	matchNewer.Spec.Template = template("v2")
	matchNewer.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "aaa"
	matchOlder := replicaSet("match-older", 1, 3)
	matchOlder.Spec.Template = template("v2")
	matchOlder.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "bbb"
	other := replicaSet("other", 1, 1)
	rsList := []*appsv1.ReplicaSet{matchNewer, other, matchOlder}

	if got := FindNewReplicaSet(d, rsList); got != matchOlder {
		t.Errorf("new = %v, want match-older", got.Name)
	}
	if got := names(FindOldReplicaSets(d, rsList)); !slices.Equal(got, []string{"other", "match-newer"}) {
		t.Errorf("old = %v", got)
	}
	if got := names(rsList); !slices.Equal(got, []string{"match-newer", "other", "match-older"}) {
		t.Errorf("the caller's slice was reordered: %v", got)
	}
	if got := FindNewReplicaSet(d, []*appsv1.ReplicaSet{other}); got != nil {
		t.Errorf("new = %v, want none", got.Name)
	}
}

func TestEqualIgnoreHash(t *testing.T) {
	a, b := template("v1"), template("v1")
	a.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "x"
	b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "y"
	if !EqualIgnoreHash(&a, &b) {
		t.Error("templates differing only in the hash label must be equal")
	}
	if _, ok := a.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; !ok {
		t.Error("inputs must not be modified")
	}
	c := template("v1")
	c.Labels["extra"] = "1"
	if EqualIgnoreHash(&a, &c) {
		t.Error("templates with different labels must differ")
	}
	d := template("v1")
	d.Labels = nil
	e := template("v1")
	e.Labels = map[string]string{}
	if !EqualIgnoreHash(&d, &e) {
		t.Error("nil and empty labels are semantically equal")
	}
}

func TestFindActiveOrLatest(t *testing.T) {
	tests := []struct {
		name   string
		newRS  *appsv1.ReplicaSet
		oldRSs []*appsv1.ReplicaSet
		want   string // "" means nil
	}{
		{"nothing", nil, nil, ""},
		{"only the new one is active", replicaSet("new", 3, 9), []*appsv1.ReplicaSet{replicaSet("a", 0, 1)}, "new"},
		{"only an old one is active", replicaSet("new", 0, 9), []*appsv1.ReplicaSet{replicaSet("a", 2, 1), replicaSet("b", 0, 2)}, "a"},
		{"none active picks the new one", replicaSet("new", 0, 9), []*appsv1.ReplicaSet{replicaSet("a", 0, 1)}, "new"},
		{"none active and no new picks the newest old", nil, []*appsv1.ReplicaSet{replicaSet("a", 0, 1), replicaSet("b", 0, 2)}, "b"},
		{"several active", replicaSet("new", 1, 9), []*appsv1.ReplicaSet{replicaSet("a", 2, 1)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FindActiveOrLatest(tc.newRS, tc.oldRSs)
			if (got == nil) != (tc.want == "") || (got != nil && got.Name != tc.want) {
				t.Errorf("got %v, want %q", got, tc.want)
			}
		})
	}
}

func TestIsSaturated(t *testing.T) {
	d := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	saturated := func() *appsv1.ReplicaSet {
		rs := withAnnotations(replicaSet("rs", 3, 0), DesiredReplicasAnnotation, "3")
		rs.Status.AvailableReplicas = 3
		return rs
	}
	if !IsSaturated(d, saturated()) {
		t.Error("want saturated")
	}
	notAvailable := saturated()
	notAvailable.Status.AvailableReplicas = 2
	staleAnnotation := withAnnotations(saturated(), DesiredReplicasAnnotation, "2")
	badAnnotation := withAnnotations(saturated(), DesiredReplicasAnnotation, "x")
	smaller := saturated()
	smaller.Spec.Replicas = new(int32(2))
	for name, rs := range map[string]*appsv1.ReplicaSet{"not available": notAvailable, "stale annotation": staleAnnotation, "bad annotation": badAnnotation, "smaller": smaller, "nil": nil} {
		if IsSaturated(d, rs) {
			t.Errorf("%s: want not saturated", name)
		}
	}
}

func TestSizeOrdersBreakTiesByAge(t *testing.T) {
	rsList := []*appsv1.ReplicaSet{replicaSet("old", 2, 0), replicaSet("big", 5, 1), replicaSet("new", 2, 2)}
	older := slices.Clone(rsList)
	slices.SortFunc(older, CompareBySizeOlder)
	if got := names(older); !slices.Equal(got, []string{"big", "old", "new"}) {
		t.Errorf("BySizeOlder = %v", got)
	}
	newer := slices.Clone(rsList)
	slices.SortFunc(newer, CompareBySizeNewer)
	if got := names(newer); !slices.Equal(got, []string{"big", "new", "old"}) {
		t.Errorf("BySizeNewer = %v", got)
	}
}

func TestStatusSums(t *testing.T) {
	a, b := replicaSet("a", 3, 0), replicaSet("b", 2, 1)
	a.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 1, TerminatingReplicas: new(int32(1))}
	b.Status = appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 1, TerminatingReplicas: new(int32(2))}
	all := []*appsv1.ReplicaSet{a, nil, b}
	if SumSpecReplicas(all) != 5 || SumStatusReplicas(all) != 5 || SumReadyReplicas(all) != 4 || SumAvailableReplicas(all) != 3 {
		t.Error("wrong sums")
	}
	if got := SumTerminatingReplicas(all); got == nil || *got != 3 {
		t.Errorf("terminating = %v, want 3", got)
	}
	never := replicaSet("never-synced", 1, 2)
	if got := SumTerminatingReplicas(append(all, never)); got == nil || *got != 3 {
		t.Errorf("a never-synced replica set must not matter, got %v", got)
	}
	silent := replicaSet("synced-without-count", 1, 2)
	silent.Status.ObservedGeneration = 1
	if got := SumTerminatingReplicas(append(all, silent)); got != nil {
		t.Errorf("a synced replica set without a count makes the sum unknown, got %d", *got)
	}
	if len(FilterActive(all)) != 2 {
		t.Error("FilterActive must drop nil")
	}
}
