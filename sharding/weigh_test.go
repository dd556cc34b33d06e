package sharding

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// The coordinator weighs the namespaces by their pods without caching them: it reads
// the pods' metadata a page at a time, so its memory does not grow with the cluster's
// pods, and still counts every pod once.
func TestPodsPerNamespaceCountsEveryPodAPageAtATime(t *testing.T) {
	var pods []metav1.PartialObjectMetadata
	for i := range 1200 {
		ns := "tenant-a"
		if i%3 == 0 {
			ns = "tenant-b"
		}
		pods = append(pods, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-" + strconv.Itoa(i)}})
	}
	client := &pagedPods{pods: pods}
	weights, err := podsPerNamespace(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	if weights["tenant-a"] != 800 || weights["tenant-b"] != 400 || len(weights) != 2 {
		t.Errorf("weights = %v, want tenant-a 800 and tenant-b 400", weights)
	}
	if limits := client.limits; len(limits) != 3 {
		t.Errorf("%d list calls for 1200 pods, want 3 pages", len(limits))
	}
	for _, l := range client.limits {
		if l != weighPageSize {
			t.Errorf("a list call asked for %d pods, want pages of %d", l, weighPageSize)
		}
	}
}

// pagedPods serves pod metadata lists as the apiserver does: at most Limit items, and a
// continue token while more are left. The fake metadata client drops Limit and Continue.
type pagedPods struct {
	metadata.Getter
	pods   []metav1.PartialObjectMetadata
	limits []int64
}

func (p *pagedPods) Resource(schema.GroupVersionResource) metadata.Getter { return p }

func (p *pagedPods) List(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	p.limits = append(p.limits, opts.Limit)
	start, end := 0, len(p.pods)
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	if opts.Limit > 0 {
		end = min(start+int(opts.Limit), len(p.pods))
	}
	list := &metav1.PartialObjectMetadataList{Items: p.pods[start:end]}
	if end < len(p.pods) {
		list.Continue = strconv.Itoa(end)
	}
	return list, nil
}

// The coordinator looks at a freshly cut cluster often, then every
// --shard-rebalance-period, and never spends more than 1/weighPause of its time
// weighing, however many pods there are.
func TestTheCoordinatorWeighsOftenAfterACutThenEveryPeriodAndNeverMostOfTheTime(t *testing.T) {
	r, _ := testReplica(t, 3)
	r.RebalancePeriod = 30 * time.Second
	start := time.Now()
	now := start
	r.now = func() time.Time { return now }
	cost := time.Duration(0)
	r.Weigh = func(context.Context) (map[string]int64, error) {
		now = now.Add(cost)
		return map[string]int64{}, nil
	}
	c := r.coordinator
	c.weighed, c.every = time.Time{}, 0
	// weighings returns the seconds, from 0, at which the coordinator weighs within d.
	weighings := func(d time.Duration) []int {
		var at []int
		for end := now.Add(d); now.Before(end); now = now.Add(time.Second) {
			if c.weighDue(now) {
				at = append(at, int(now.Sub(start).Seconds()))
				if _, err := c.weigh(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		return at
	}
	if got, want := weighings(2*time.Minute), []int{0, 10, 30, 60, 90}; !slices.Equal(got, want) {
		t.Errorf("weighings after the coordinator started at %v s, want %v", got, want)
	}
	c.every = 0 // a cut was activated at 120 s
	if got, want := weighings(time.Minute+time.Second), []int{120, 130, 150, 180}; !slices.Equal(got, want) {
		t.Errorf("weighings after a cut at %v s, want %v", got, want)
	}
	// A weighing that takes 3 s (about 90 000 pods) is done at most once a minute.
	cost = 3 * time.Second
	got := weighings(3 * time.Minute)
	for i := 1; i < len(got); i++ {
		if gap := got[i] - got[i-1]; gap < weighPause*3 {
			t.Errorf("weighings of 3 s at %v s: %d s apart, want at least %d", got, gap, weighPause*3)
		}
	}
}
