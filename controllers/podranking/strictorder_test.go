package podranking

import (
	"reflect"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestTiesWithinAnAgeBucketSortTheSameWhateverTheInputOrder(t *testing.T) {
	// a and b became ready in the same second and a restarted more; c became ready a
	// minute later, in the same log2 bucket. Upstream's order has a cycle here: a < b
	// (restarts), b < c and c < a (UIDs), so the sorted result depends on the input.
	readyAt := metav1.Time{Time: then5Hours.Add(-time.Minute)}
	a := pod("a", "node", v1.PodRunning, true, 3, 0, readyAt, then1Month, "")
	b := pod("b", "node", v1.PodRunning, true, 0, 0, readyAt, then1Month, "")
	c := pod("c", "node", v1.PodRunning, true, 0, 0, then5Hours, then1Month, "")
	a.UID, b.UID, c.UID = types.UID("3"), types.UID("1"), types.UID("2")

	var first []string
	for _, order := range [][]*v1.Pod{{a, b, c}, {a, c, b}, {b, a, c}, {b, c, a}, {c, a, b}, {c, b, a}} {
		pods := append([]*v1.Pod(nil), order...)
		sort.Sort(ActivePodsWithRanks{Pods: pods, Rank: []int{1, 1, 1}, Now: now})
		if first == nil {
			first = podNames(pods)
			continue
		}
		if got := podNames(pods); !reflect.DeepEqual(got, first) {
			t.Fatalf("input %v sorted to %v, another input to %v", podNames(order), got, first)
		}
	}
	// Within the bucket, more restarts still come first.
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(first, want) {
		t.Errorf("sorted %v, want %v (restarts, then UID)", first, want)
	}
}
