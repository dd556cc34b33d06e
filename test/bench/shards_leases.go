package bench

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/sharding"
)

// leaseTimeline follows the replicas' Leases as the benchmark's informer sees them:
// when each plan epoch was proposed (a handover starts: every holder drains and
// releases its shards), when it became active, and when every one of its shards was
// held again, which ends the pause in the work.
type leaseTimeline struct {
	shards int

	mu sync.Mutex
	// origin is the start of the workload, which the times of the summary count from.
	origin time.Time
	active *sharding.Epoch
	// settledErr says why the shards are not all held, nil when they are.
	settledErr                   error
	proposed, activated, allHeld map[int64]time.Time
}

func newLeaseTimeline(shardCount int) *leaseTimeline {
	return &leaseTimeline{
		shards:     shardCount,
		settledErr: fmt.Errorf("no Lease seen yet"),
		proposed:   map[int64]time.Time{},
		activated:  map[int64]time.Time{},
		allHeld:    map[int64]time.Time{},
	}
}

// observe reads the Leases anew after any of them changed.
func (t *leaseTimeline) observe(lister coordinationlisters.LeaseLister) {
	now := time.Now()
	all, err := lister.Leases(benchLeaseNamespace).List(labels.Everything())
	if err != nil {
		return
	}
	byName := map[string]*coordinationv1.Lease{}
	for _, l := range all {
		byName[l.Name] = l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shards == 1 {
		t.settledErr = nil
		if l := byName[benchLeaseName]; l == nil || ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			t.settledErr = fmt.Errorf("the leader Lease %s is not held", benchLeaseName)
		}
		return
	}
	plan := byName[sharding.PlanLeaseName(benchLeaseName)]
	if plan == nil {
		t.settledErr = fmt.Errorf("no plan Lease yet")
		return
	}
	active, next, err := sharding.PlanOf(plan)
	if err != nil {
		t.settledErr = err
		return
	}
	if next != nil {
		if _, ok := t.proposed[next.Number]; !ok {
			t.proposed[next.Number] = now
		}
	}
	if active == nil {
		t.settledErr = fmt.Errorf("no active plan yet")
		return
	}
	t.active = active
	if _, ok := t.activated[active.Number]; !ok {
		t.activated[active.Number] = now
	}
	t.settledErr = nil
	if next != nil {
		t.settledErr = fmt.Errorf("handing over from epoch %d to %d", active.Number, next.Number)
		return
	}
	for i := range active.Plan.Shards() {
		l := byName[sharding.ShardLeaseName(benchLeaseName, i)]
		switch {
		case l == nil:
			t.settledErr = fmt.Errorf("shard %d has no Lease", i)
		case l.Labels[sharding.LabelEpoch] != active.Label(i):
			t.settledErr = fmt.Errorf("shard %d's Lease carries epoch %s, the plan at %d gives it %s", i, l.Labels[sharding.LabelEpoch], active.Number, active.Label(i))
		case ptr.Deref(l.Spec.HolderIdentity, "") == "":
			t.settledErr = fmt.Errorf("shard %d is not held", i)
		}
		if t.settledErr != nil {
			return
		}
	}
	if _, ok := t.allHeld[active.Number]; !ok {
		t.allHeld[active.Number] = now
	}
}

func (t *leaseTimeline) setOrigin(origin time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.origin = origin
}

// settled returns nil when every shard of the active plan is held and no handover is
// under way.
func (t *leaseTimeline) settled() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.settledErr
}

// activePlan returns the active plan (no cuts with one shard).
func (t *leaseTimeline) activePlan() sharding.Plan {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active == nil {
		return sharding.Plan{}
	}
	return t.active.Plan
}

// summary returns the active epoch and every handover seen, in order.
func (t *leaseTimeline) summary() (int64, []Handover) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active == nil {
		return 0, nil
	}
	since := func(at time.Time) float64 {
		if at.IsZero() {
			return 0
		}
		return at.Sub(t.origin).Seconds()
	}
	var epochs []int64
	for e := range t.proposed {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	var handovers []Handover
	for _, e := range epochs {
		h := Handover{
			Epoch:               e,
			ProposedAtSeconds:   since(t.proposed[e]),
			ActivatedAtSeconds:  since(t.activated[e]),
			AllHeldAtSeconds:    since(t.allHeld[e]),
			PauseSeconds:        -1,
			BeforeWorkloadBegan: t.proposed[e].Before(t.origin),
		}
		if held, ok := t.allHeld[e]; ok {
			h.PauseSeconds = held.Sub(t.proposed[e]).Seconds()
		}
		handovers = append(handovers, h)
	}
	return t.active.Number, handovers
}

// atomicTime is a time.Time for concurrent use.
type atomicTime struct{ nanos atomic.Int64 }

func (a *atomicTime) store(t time.Time) { a.nanos.Store(t.UnixNano()) }
func (a *atomicTime) load() time.Time   { return time.Unix(0, a.nanos.Load()) }
