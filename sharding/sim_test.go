package sharding

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// The simulator runs N replicas and their coordinator in one goroutine on a virtual
// clock, over an in-memory Lease store with resourceVersion conflicts. Each replica
// decides with the real decideReplica on its own, possibly stale and reordered, view of
// the Leases; the replica holding the base Lease runs the real coordinator step; shard
// elections follow client-go's rules through the replica's real Lease client and epoch
// guard (acquire a released Lease or one seen unchanged for its duration, renew within
// the renew deadline, lose it on reading another holder), start a moment after the
// decision to campaign and now and then move on before the replica's loop has seen a
// change; a term's fence is open until its last renewal plus the lease duration minus
// leaderelection.Margin. A seed picks the schedule: crashes, freezes, slow watches, a
// watch stalled on the plan Lease (a stale coordinator or replica), plan and shard
// Lease deletions, the plan deleted with every shard Lease of the highest epoch, plans
// edited by hand, changed weights (recuts), workers slow to stop. After every step the
// invariants are checked; a failure prints the seed and the trace.

var (
	simSeeds = flag.Int("sim-seeds", 0, "number of simulator schedules (0: SHARDING_SIM_SEEDS or the default)")
	simSeed  = flag.Int64("sim-seed", -1, "run this one simulator schedule, verbosely")
	// simMutation plants a bug in the one schedule of -sim-seed, to read how it is caught.
	simMutation = flag.Int("sim-mutation", 0, "with -sim-seed: the planted bug (a mutation constant) to run the schedule with")
)

const (
	simLease    = 15 * time.Second
	simRenew    = 10 * time.Second
	simRetry    = 2 * time.Second
	simShutdown = 10 * time.Second
	simShards   = 4
	simReplicas = 3
	simSteps    = 600
)

// simStore is the apiserver's Lease storage: every write bumps the resourceVersion, and
// an update or a conditional delete with another resourceVersion than stored conflicts.
type simStore struct {
	rv     int64
	leases map[string]*coordinationv1.Lease
}

func (s *simStore) list() []*coordinationv1.Lease {
	var out []*coordinationv1.Lease
	for _, l := range s.leases {
		out = append(out, l.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (s *simStore) create(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if _, ok := s.leases[l.Name]; ok {
		return nil, apierrors.NewAlreadyExists(leaseResource, l.Name)
	}
	s.rv++
	l = l.DeepCopy()
	l.ResourceVersion = strconv.FormatInt(s.rv, 10)
	s.leases[l.Name] = l
	return l.DeepCopy(), nil
}

func (s *simStore) update(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	old, ok := s.leases[l.Name]
	if !ok {
		return nil, apierrors.NewNotFound(leaseResource, l.Name)
	}
	if l.ResourceVersion != old.ResourceVersion {
		return nil, apierrors.NewConflict(leaseResource, l.Name, fmt.Errorf("resourceVersion %s, stored %s", l.ResourceVersion, old.ResourceVersion))
	}
	s.rv++
	l = l.DeepCopy()
	l.ResourceVersion = strconv.FormatInt(s.rv, 10)
	s.leases[l.Name] = l
	return l.DeepCopy(), nil
}

func (s *simStore) delete(name, rv string) error {
	old, ok := s.leases[name]
	if !ok {
		return apierrors.NewNotFound(leaseResource, name)
	}
	if rv != "" && rv != old.ResourceVersion {
		return apierrors.NewConflict(leaseResource, name, fmt.Errorf("precondition %s, stored %s", rv, old.ResourceVersion))
	}
	delete(s.leases, name)
	return nil
}

// client returns a clientset whose Lease calls reach the store directly, without the
// fake clientset's reactors and record of every action (a schedule makes thousands).
func (s *simStore) client() kubernetes.Interface {
	return simClientset{Clientset: fake.NewClientset(), store: s}
}

type simClientset struct {
	*fake.Clientset
	store *simStore
}

func (c simClientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return simCoordination{CoordinationV1Interface: c.Clientset.CoordinationV1(), store: c.store}
}

type simCoordination struct {
	coordinationv1client.CoordinationV1Interface
	store *simStore
}

func (c simCoordination) Leases(string) coordinationv1client.LeaseInterface {
	return simLeases{store: c.store}
}

// simLeases is the store's Lease API; the calls the product does not make are left
// to the embedded nil interface.
type simLeases struct {
	coordinationv1client.LeaseInterface
	store *simStore
}

func (l simLeases) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	lease, ok := l.store.leases[name]
	if !ok {
		return nil, apierrors.NewNotFound(leaseResource, name)
	}
	return lease.DeepCopy(), nil
}

func (l simLeases) Create(_ context.Context, lease *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return l.store.create(lease)
}

func (l simLeases) Update(_ context.Context, lease *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	return l.store.update(lease)
}

func (l simLeases) Delete(_ context.Context, name string, opts metav1.DeleteOptions) error {
	rv := ""
	if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
		rv = *opts.Preconditions.ResourceVersion
	}
	return l.store.delete(name, rv)
}

// simElection is one election of a replica: a shard's (with its epoch) or the base
// Lease's (shard -1, the coordinator's).
type simElection struct {
	shard    int
	epoch    Epoch
	leading  bool
	stopping bool
	// lastRenew is when the Lease was last acquired or renewed; the fence is open until
	// lastRenew + lease duration - margin.
	lastRenew time.Time
	// observedRV and observedAt are client-go's observation of the Lease.
	observedRV string
	observedAt time.Time
	// expired is a Lease to release first (breakExpired).
	expired *coordinationv1.Lease
	// stopAt is when the election was told to stop, drained when its workers stop.
	stopAt, drained time.Time
	// notBefore is when a new election first reads its Lease: the elector runs in its
	// own goroutine, so a decision to campaign and the acquisition are not one step.
	notBefore time.Time
	// leases is a shard election's Lease client, the replica's real one: guarded by
	// GuardEpoch with the election's label.
	leases coordinationv1client.LeaseInterface
}

type simReplica struct {
	id        string
	replica   *Replica
	crashed   bool
	frozenTil time.Time
	// staleTil is when the replica's informer sees the plan Lease again: until then its
	// view of the plan stays as it was (a stalled watch), while it sees the other Leases.
	staleTil time.Time
	// cache is the replica's Lease informer's view.
	cache     map[string]*coordinationv1.Lease
	elections map[int]*simElection
}

type sim struct {
	t *testing.T
	// mutation is the bug planted in every replica (Config.mutation).
	mutation mutation
	rng      *rand.Rand
	now      time.Time
	store    *simStore
	replicas []*simReplica
	weights  map[string]int64
	// epochs holds every epoch activated; labels maps every shard label activated to
	// its range.
	epochs map[string]bool
	labels map[string]string
	trace  []string
	// lastServed is when every shard of the active plan was last held.
	lastServed time.Time
	restarts   int
	// recuts counts the epochs activated after the first; partialRecuts those that
	// kept some shard's range (and holder) from the epoch before.
	recuts, partialRecuts int
	// violation is an invariant broken inside a step.
	violation string
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%8.1fs ", s.now.Sub(time.Unix(0, 0)).Seconds())+fmt.Sprintf(format, args...))
}

func newSim(t *testing.T, seed int64, m mutation) *sim {
	s := &sim{
		t: t, mutation: m, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), now: time.Unix(0, 0),
		store:   &simStore{leases: map[string]*coordinationv1.Lease{}},
		weights: map[string]int64{}, epochs: map[string]bool{}, labels: map[string]string{},
	}
	for i := range 12 {
		s.weights[fmt.Sprintf("tenant-%02d", i)] = int64(1 + s.rng.IntN(20))
	}
	for range simReplicas {
		s.replicas = append(s.replicas, s.newReplica())
	}
	return s
}

func (s *sim) newReplica() *simReplica {
	s.restarts++
	id := fmt.Sprintf("replica-%d", s.restarts)
	client := s.store.client()
	r := New(Config{
		mutation: s.mutation,
		Base:     testBase, Namespace: testNamespace, Identity: id, Shards: simShards,
		Timings:            leaderelection.Timings{LeaseDuration: simLease, RenewDeadline: simRenew, RetryPeriod: simRetry},
		RebalanceThreshold: 1.2, RebalancePeriod: time.Minute,
		Client: client, CoordinatorClient: client, Probe: client,
		Weigh: func(context.Context) (map[string]int64, error) {
			w := map[string]int64{}
			for k, v := range s.weights {
				w[k] = v
			}
			return w, nil
		},
		Recorder: func() record.EventRecorder { return record.NewFakeRecorder(1000) },
	})
	r.recorder = r.Recorder()
	r.now = func() time.Time { return s.now }
	sr := &simReplica{id: id, replica: r, cache: map[string]*coordinationv1.Lease{}, elections: map[int]*simElection{}}
	r.Exit = func(int) {
		s.logf("EXIT %s", id)
		sr.crashed = true
	}
	return sr
}

// refresh brings a replica's cache up to date, each Lease with probability p: a slow
// watch, and updates seen out of order.
func (s *sim) refresh(sr *simReplica, p float64) {
	for _, l := range s.cached(sr) {
		if l.Name == PlanLeaseName(testBase) && s.now.Before(sr.staleTil) {
			continue
		}
		if _, ok := s.store.leases[l.Name]; !ok && s.rng.Float64() < p {
			delete(sr.cache, l.Name)
		}
	}
	names := slices.Sorted(maps.Keys(s.store.leases))
	for _, name := range names {
		l := s.store.leases[name]
		if name == PlanLeaseName(testBase) && s.now.Before(sr.staleTil) {
			continue
		}
		if l.Labels[LabelSet] == testBase && s.rng.Float64() < p {
			// The store replaces a Lease on every write and never changes one in place,
			// so a cached copy at the same resourceVersion is the same Lease.
			if c, ok := sr.cache[name]; !ok || c.ResourceVersion != l.ResourceVersion {
				sr.cache[name] = l.DeepCopy()
			}
		}
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, l := range sr.cache {
		_ = indexer.Add(l)
	}
	sr.replica.leases = coordinationlisters.NewLeaseLister(indexer).Leases(testNamespace)
}

func (s *sim) cached(sr *simReplica) []*coordinationv1.Lease {
	var out []*coordinationv1.Lease
	for _, l := range sr.cache {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *sim) leaseName(shard int) string {
	if shard < 0 {
		return testBase
	}
	return ShardLeaseName(testBase, shard)
}

// stepElection moves one election on, as client-go's elector does. A shard election
// reads and writes its Lease through the replica's real Lease client (GuardEpoch), as
// the elector would; the base Lease's election reaches the store directly.
func (s *sim) stepElection(sr *simReplica, e *simElection) (ended bool) {
	name := s.leaseName(e.shard)
	ctx := context.Background()
	get := func() (*coordinationv1.Lease, bool) {
		if e.shard < 0 {
			l, ok := s.store.leases[name]
			return l, ok
		}
		l, err := e.leases.Get(ctx, name, metav1.GetOptions{})
		return l, err == nil
	}
	update := func(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
		if e.shard < 0 {
			return s.store.update(l)
		}
		return e.leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if e.shard >= 0 && e.leases == nil {
		e.leases = sr.replica.shardLeases(e.epoch.Label(e.shard)).Leases(testNamespace)
	}
	if !e.stopping && s.now.Before(e.notBefore) {
		return false
	}
	if e.stopping {
		if e.stopAt.IsZero() {
			// The term's workers take a while to stop, now and then longer than the
			// shutdown timeout.
			e.stopAt = s.now
			d := time.Duration(s.rng.IntN(4000)) * time.Millisecond
			if s.rng.IntN(40) == 0 {
				d = 3 * simShutdown
			}
			e.drained = s.now.Add(d)
		}
		if s.now.Before(e.drained) {
			if s.now.Sub(e.stopAt) >= simShutdown {
				// The term gives up on its workers (ErrControllersStillRunning); the
				// election ends, and the process must exit (the real electionEnded).
				s.logf("%s: the workers of %s did not stop within the shutdown timeout", sr.id, name)
				sr.replica.electionEnded(klog.Background(), fmt.Errorf("shutdown timeout: %w", leaderelection.ErrControllersStillRunning),
					leaderelection.NewFence(name, simLease, nil))
				if !sr.crashed {
					s.violation = fmt.Sprintf("the workers of %s in %s outlived their term", name, sr.id)
				}
				return true
			}
			return false
		}
		if l, ok := get(); ok && e.leading && holder(l) == sr.id {
			released := l.DeepCopy()
			released.Spec.HolderIdentity = nil
			if _, err := update(released); err == nil {
				s.logf("%s released %s (epoch %d)", sr.id, name, e.epoch.Number)
			}
		}
		return true
	}
	l, ok := get()
	if !ok {
		if e.shard < 0 {
			created := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(sr.id), LeaseDurationSeconds: ptr.To(int32(simLease.Seconds()))}}
			if _, err := s.store.create(created); err == nil {
				e.leading, e.lastRenew = true, s.now
			}
			return false
		}
		if e.leading && s.now.Sub(e.lastRenew) > simRenew {
			s.logf("%s lost %s (deleted)", sr.id, name)
			return true
		}
		return false
	}
	if l.ResourceVersion != e.observedRV {
		e.observedRV, e.observedAt = l.ResourceVersion, s.now
	}
	if e.expired != nil {
		sr.replica.breakExpired(ctx, e.expired, e.epoch.Label(e.shard))
		e.expired = nil
		if l, ok = get(); !ok {
			return false
		}
		if l.ResourceVersion != e.observedRV {
			e.observedRV, e.observedAt = l.ResourceVersion, s.now
		}
	}
	if e.leading {
		switch {
		case holder(l) != sr.id:
			s.logf("%s lost %s to %q", sr.id, name, holder(l))
			return true
		default:
			renewed := l.DeepCopy()
			if _, err := update(renewed); err == nil {
				e.lastRenew = s.now
				return false
			}
		}
		if s.now.Sub(e.lastRenew) > simRenew {
			s.logf("%s lost %s (not renewed)", sr.id, name)
			return true
		}
		return false
	}
	if holder(l) == "" || holder(l) == sr.id || s.now.Sub(e.observedAt) > simLease {
		acquired := l.DeepCopy()
		acquired.Spec.HolderIdentity = ptr.To(sr.id)
		acquired.Spec.LeaseDurationSeconds = ptr.To(int32(simLease.Seconds()))
		if _, err := update(acquired); err == nil {
			e.leading, e.lastRenew = true, s.now
			s.logf("%s acquired %s (epoch %d, range %s)", sr.id, name, e.epoch.Number, rangeOf(e))
		}
	}
	return false
}

func rangeOf(e *simElection) string {
	if e.shard < 0 {
		return "-"
	}
	start, end := e.epoch.Plan.Bounds(e.shard)
	return "[" + start + ", " + end + ")"
}

// fenceOpen reports whether e's term may write now.
func (s *sim) fenceOpen(sr *simReplica, e *simElection) bool {
	return !sr.crashed && e.leading && s.now.Before(e.lastRenew.Add(simLease-leaderelection.Margin(simLease)))
}

// stepReplica runs one pass of a replica: its membership, its decisions, its
// elections and, while it holds the base Lease, the coordinator's step.
func (s *sim) stepReplica(sr *simReplica) {
	// Membership, renewed on every pass.
	member := MemberLeaseName(testBase, sr.id)
	if l, ok := s.store.leases[member]; ok {
		_, _ = s.store.update(l)
	} else {
		_, _ = s.store.create(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: member, Namespace: testNamespace, Labels: Labels(testBase, RoleMember)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(sr.id), LeaseDurationSeconds: ptr.To(int32(simLease.Seconds()))}})
	}
	s.refresh(sr, 0.8)
	r := sr.replica
	all := s.cached(sr)
	r.seen.observe(all, s.now)
	// The replica's loop runs on informer events and a resync, its elections on their
	// own retry period: now and then the elections move on before the loop has seen
	// what changed (a new plan, a relabelled Lease).
	if s.rng.IntN(4) == 0 {
		s.stepElections(sr)
		return
	}
	view := replicaView{identity: sr.id, base: testBase, leases: all, seen: r.seen.snapshot(), elections: map[int]electionView{}, mutation: r.mutation}
	for shard, e := range sr.elections {
		if shard >= 0 {
			view.elections[shard] = electionView{label: e.epoch.Label(shard), leading: e.leading, stopping: e.stopping}
		}
	}
	actions, _ := decideReplica(view, s.now)
	for _, a := range actions {
		switch a.kind {
		case stopElection:
			sr.elections[a.shard].stopping = true
			s.logf("%s stops shard %d: %s", sr.id, a.shard, a.why)
		case campaign:
			sr.elections[a.shard] = &simElection{shard: a.shard, epoch: a.epoch, expired: a.expired,
				notBefore: s.now.Add(time.Duration(s.rng.IntN(3000)) * time.Millisecond)}
		}
	}
	s.stepElections(sr)
}

// stepElections moves every election of a replica on and, while it holds the base
// Lease, runs the coordinator's step.
func (s *sim) stepElections(sr *simReplica) {
	ctx := context.Background()
	r := sr.replica
	if _, ok := sr.elections[-1]; !ok {
		sr.elections[-1] = &simElection{shard: -1}
	}
	for _, shard := range sortedElections(sr.elections) {
		if s.stepElection(sr, sr.elections[shard]) {
			delete(sr.elections, shard)
		}
		if sr.crashed {
			return
		}
	}
	if e := sr.elections[-1]; e != nil && s.fenceOpen(sr, e) {
		// The informer may have moved on since the replica's loop observed it.
		if s.rng.IntN(3) == 0 {
			s.refresh(sr, 0.5)
		}
		_ = r.coordinator.step(ctx)
	}
}

// fault injects one fault now and then.
func (s *sim) fault() {
	sr := s.replicas[s.rng.IntN(len(s.replicas))]
	switch n := s.rng.IntN(400); {
	case n < 3 && !sr.crashed:
		s.logf("CRASH %s", sr.id)
		sr.crashed = true
	case n < 6 && !sr.crashed:
		d := time.Duration(s.rng.IntN(int(3*simLease/time.Second))) * time.Second
		s.logf("FREEZE %s for %s", sr.id, d)
		sr.frozenTil = s.now.Add(d)
	case n < 8:
		if _, ok := s.store.leases[PlanLeaseName(testBase)]; ok {
			s.logf("DELETE the plan Lease")
			_ = s.store.delete(PlanLeaseName(testBase), "")
		}
	case n < 10:
		name := ShardLeaseName(testBase, s.rng.IntN(simShards))
		if _, ok := s.store.leases[name]; ok {
			s.logf("DELETE %s", name)
			_ = s.store.delete(name, "")
		}
	case n < 13:
		ns := fmt.Sprintf("tenant-%02d", s.rng.IntN(12))
		s.weights[ns] = int64(1 + s.rng.IntN(200))
		s.logf("WEIGHT %s = %d", ns, s.weights[ns])
	case n < 15:
		s.deleteHighestEpoch()
	case n < 17:
		s.editPlan()
	case n < 23 && !sr.crashed:
		// The replica's watch stalls on the plan Lease: a coordinator or a replica that
		// acts on an old plan while it sees the other Leases change. Half the time it
		// is the coordinator's, and a shard Lease is deleted under it.
		if s.rng.IntN(2) == 0 {
			for _, c := range s.replicas {
				if e := c.elections[-1]; e != nil && s.fenceOpen(c, e) {
					sr = c
					name := ShardLeaseName(testBase, s.rng.IntN(simShards))
					if s.store.delete(name, "") == nil {
						s.logf("DELETE %s", name)
					}
				}
			}
		}
		d := time.Duration(s.rng.IntN(int(3*simLease/time.Second))) * time.Second
		s.logf("STALE PLAN in %s for %s", sr.id, d)
		sr.staleTil = s.now.Add(d)
	}
}

// deleteHighestEpoch deletes the plan Lease and the shard Leases whose label carries
// the highest epoch number, as kubectl delete lease -l would: the coordinator may then
// number a new epoch as one used before, with other cuts.
func (s *sim) deleteHighestEpoch() {
	var highest int64
	for _, l := range s.store.leases {
		if n, ok := EpochOfLabel(l.Labels[LabelEpoch]); ok && l.Labels[LabelRole] == RoleShard {
			highest = max(highest, n)
		}
	}
	s.logf("DELETE the plan Lease and the shard Leases of epoch %d", highest)
	_ = s.store.delete(PlanLeaseName(testBase), "")
	for _, l := range s.store.list() {
		if n, ok := EpochOfLabel(l.Labels[LabelEpoch]); ok && n == highest && l.Labels[LabelRole] == RoleShard {
			_ = s.store.delete(l.Name, "")
		}
	}
}

// editPlan moves one cut of the active plan by hand, keeping its epoch number and
// what it says about which epoch gave each shard its range.
func (s *sim) editPlan() {
	plan, ok := s.store.leases[PlanLeaseName(testBase)]
	if !ok {
		return
	}
	active, _, err := PlanOf(plan)
	if err != nil || active == nil || len(active.Plan.Cuts) == 0 {
		return
	}
	edited := *active
	edited.Plan.Cuts = slices.Clone(active.Plan.Cuts)
	k := s.rng.IntN(len(edited.Plan.Cuts))
	lo, hi := uint64(1), uint64(math.MaxUint64)
	if k > 0 {
		lo = edited.Plan.Cuts[k-1] + 1
	}
	if k+1 < len(edited.Plan.Cuts) {
		hi = edited.Plan.Cuts[k+1] - 1
	}
	if hi <= lo {
		return
	}
	edited.Plan.Cuts[k] = lo + s.rng.Uint64N(hi-lo)
	updated := plan.DeepCopy()
	updated.Annotations[AnnotationPlan] = edited.String()
	if _, err := s.store.update(updated); err == nil {
		s.logf("EDIT the plan: epoch %d, cut %d moved to 0x%016x", edited.Number, k, edited.Plan.Cuts[k])
	}
}

// restart restarts a crashed replica now and then, as the kubelet does, also after the
// faults stopped: liveness is only promised while some replica runs.
func (s *sim) restart() {
	for i, sr := range s.replicas {
		if sr.crashed && s.rng.IntN(20) == 0 {
			s.replicas[i] = s.newReplica()
			s.logf("RESTART as %s", s.replicas[i].id)
		}
	}
}

func sortedElections(elections map[int]*simElection) []int {
	var shards []int
	for shard := range elections {
		shards = append(shards, shard)
	}
	sort.Ints(shards)
	return shards
}

type simTerm struct {
	owner string
	shard int
	label string
	// start and last are the first and the last hash of the term's range.
	start, last uint64
}

func (t simTerm) overlaps(o simTerm) bool {
	return t.start <= o.last && o.start <= t.last
}

// check verifies the invariants after a step.
func (s *sim) check() error {
	if s.violation != "" {
		return errors.New(s.violation)
	}
	var open []simTerm
	for _, sr := range s.replicas {
		for shard, e := range sr.elections {
			if shard < 0 || !s.fenceOpen(sr, e) {
				continue
			}
			t := simTerm{owner: sr.id, shard: shard, label: e.epoch.Label(shard)}
			if shard > 0 {
				t.start = e.epoch.Plan.Cuts[shard-1]
			}
			t.last = math.MaxUint64
			if shard < len(e.epoch.Plan.Cuts) {
				t.last = e.epoch.Plan.Cuts[shard] - 1
			}
			open = append(open, t)
		}
	}
	for i := range open {
		for j := i + 1; j < len(open); j++ {
			if open[i].overlaps(open[j]) {
				return fmt.Errorf("two open fences on overlapping ranges: %+v and %+v", open[i], open[j])
			}
		}
	}
	if plan, ok := s.store.leases[PlanLeaseName(testBase)]; ok {
		active, next, err := PlanOf(plan)
		if err != nil {
			return err
		}
		// An epoch number may come back with other cuts (the faults delete the plan and
		// the Leases of the highest epoch, or edit the plan), but a label, once active,
		// names one range for good.
		if active != nil {
			for shard := range active.Plan.Shards() {
				start, end := active.Plan.Bounds(shard)
				label, bounds := active.Label(shard), start+","+end
				if before, seen := s.labels[label]; seen && before != bounds {
					return fmt.Errorf("label %s active again with another range: [%s), before [%s)", label, bounds, before)
				}
				s.labels[label] = bounds
			}
			if _, seen := s.epochs[active.String()]; !seen && len(s.epochs) > 0 {
				s.recuts++
				for shard := range active.Plan.Shards() {
					if n, _ := EpochOfLabel(active.Label(shard)); n != active.Number {
						s.partialRecuts++
						break
					}
				}
			}
			s.epochs[active.String()] = true
		}
		if active != nil && next == nil {
			held := map[int]bool{}
			for _, t := range open {
				if t.label == active.Label(t.shard) {
					held[t.shard] = true
				}
			}
			if len(held) == active.Plan.Shards() {
				s.lastServed = s.now
			}
		}
	}
	return nil
}

func runSim(t *testing.T, seed int64, m mutation) error {
	s := newSim(t, seed, m)
	var err error
	for step := range simSteps {
		s.now = s.now.Add(time.Duration(500+s.rng.IntN(1000)) * time.Millisecond)
		// Faults in the first two thirds only: the last third shows that the shards are
		// served again.
		if step < simSteps*2/3 {
			s.fault()
		}
		s.restart()
		for _, i := range s.rng.Perm(len(s.replicas)) {
			sr := s.replicas[i]
			if sr.crashed || s.now.Before(sr.frozenTil) || s.rng.IntN(5) == 0 {
				continue
			}
			s.stepReplica(sr)
		}
		if err = s.check(); err != nil {
			break
		}
	}
	if err == nil && s.now.Sub(s.lastServed) > 2*time.Minute {
		err = fmt.Errorf("liveness: the shards of the active plan were not all held at the end (last at %s)", s.lastServed.Sub(time.Unix(0, 0)))
	}
	if err != nil {
		return fmt.Errorf("seed %d: %w\ntrace (last 60 lines; -sim-seed=%d prints all):\n%s", seed, err, seed, strings.Join(s.trace[max(0, len(s.trace)-60):], "\n"))
	}
	if *simSeed >= 0 {
		t.Logf("seed %d: epochs %v\n%s", seed, slices.Sorted(maps.Keys(s.epochs)), strings.Join(s.trace, "\n"))
	}
	simRecuts.Add(int64(s.recuts))
	simPartialRecuts.Add(int64(s.partialRecuts))
	return nil
}

// simRecuts and simPartialRecuts add up the recuts of every schedule, to show that the
// schedules reach the handover that keeps some shards.
var simRecuts, simPartialRecuts atomic.Int64

// seedCount returns the number of schedules to play: -sim-seeds, else the environment
// variable env, else def (make test's).
func seedCount(t *testing.T, env string, def int) int {
	seeds := def
	if v, set := os.LookupEnv(env); set {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			// A run of no schedules would pass having checked nothing.
			t.Fatalf("%s=%q: want a number of schedules of at least 1 (unset: %d)", env, v, def)
		}
		seeds = n
	}
	if *simSeeds > 0 {
		seeds = *simSeeds
	}
	return seeds
}

// simSeedCount is the number of the model's schedules: SHARDING_SIM_SEEDS, else 250.
func simSeedCount(t *testing.T) int { return seedCount(t, "SHARDING_SIM_SEEDS", 250) }

// quietKlog silences the real code's logs, which every step writes: a run of
// schedules would spend its time there.
func quietKlog(t *testing.T) {
	var quiet flag.FlagSet
	klog.InitFlags(&quiet)
	_ = quiet.Set("logtostderr", "false")
	_ = quiet.Set("alsologtostderr", "false")
	klog.SetOutput(io.Discard)
	t.Cleanup(func() {
		_ = quiet.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
}

// playSchedules plays the schedules of seeds [0, seeds) with mutation m, one worker
// per CPU, each taking the next seed, and returns the failure of the lowest failing
// seed (nil if none); the others stop at the first failure.
func playSchedules(t *testing.T, seeds int, m mutation) error {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		failures = map[int64]error{}
		workers  sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for seed := next.Add(1) - 1; seed < int64(seeds); seed = next.Add(1) - 1 {
				if err := runSim(t, seed, m); err != nil {
					mu.Lock()
					failures[seed] = err
					mu.Unlock()
					next.Store(int64(seeds)) // stop the others
					return
				}
			}
		})
	}
	workers.Wait()
	first := int64(-1)
	for seed := range failures {
		if first < 0 || seed < first {
			first = seed
		}
	}
	if first < 0 {
		return nil
	}
	return failures[first]
}

func TestSimulatedReplicasNeverHaveTwoOpenFencesOnOneNamespace(t *testing.T) {
	quietKlog(t)
	if *simSeed >= 0 {
		if err := runSim(t, *simSeed, mutation(*simMutation)); err != nil {
			t.Fatal(err)
		}
		return
	}
	seeds := simSeedCount(t)
	start := time.Now()
	if err := playSchedules(t, seeds, noMutation); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d schedules in %s; %d recuts activated, %d of them kept some shards' ranges and holders",
		seeds, time.Since(start).Round(time.Millisecond), simRecuts.Load(), simPartialRecuts.Load())
	if simPartialRecuts.Load() == 0 && seeds >= 100 {
		t.Error("no schedule reached a recut that keeps a shard: the simulator no longer exercises per-shard handovers")
	}
}

// Each planted bug (Config.mutation) must fail one of the schedules a normal run
// plays: a checker that cannot fail proves nothing.
func TestSimulationCatchesEachPlantedBug(t *testing.T) {
	quietKlog(t)
	requireEachPlantedBugCaught(t, simSeedCount(t), func(seed int64, m mutation) error { return runSim(t, seed, m) },
		map[invariant]string{exclusion: "two open fences on overlapping ranges", liveness: "liveness:"})
}

// invariant is what a simulation judges, and what a planted bug must be caught by.
type invariant string

const (
	// exclusion: no two replicas write one namespace at once (open fences on
	// overlapping ranges, in the decision simulation).
	exclusion invariant = "exclusion"
	// authority: a replica writes a namespace only while its latest accepted renewal
	// of a shard Lease holding it is recent (the replica simulation judges it).
	authority invariant = "authority"
	// liveness: every shard is held and served again once the faults end.
	liveness invariant = "liveness"
)

// plantedBugs are the bugs of mutation.go that the simulations must catch, each with
// the invariants it breaks (any one of them catches it).
var plantedBugs = []struct {
	mutation mutation
	name     string
	breaks   []invariant
}{
	{mutationRelabelHeld, "a handover relabels shard Leases that are still held", []invariant{exclusion}},
	{mutationCreateReleased, "a missing shard Lease is created released", []invariant{exclusion}},
	{mutationPendingStopsNothing, "a pending plan stops no election", []invariant{liveness}},
	{mutationNoWaitForRecreatedHold, "a handover does not wait for a recreated Lease's hold", []invariant{exclusion}},
	{mutationObserveIgnoresVersion, "an observation ignores a changed resourceVersion", []invariant{exclusion}},
	// A replica elected on a Lease of another plan's label writes a range its Lease
	// does not hold: beside the current holder (exclusion), or with no renewal of a
	// Lease that holds the namespace behind it (authority).
	{mutationNoLabelGuard, "shard elections run without GuardEpoch", []invariant{exclusion, authority}},
	{mutationCampaignUnsettled, "replicas campaign under a plan whose Leases are not all relabelled", []invariant{exclusion}},
}

// requireEachPlantedBugCaught plays the schedules of seeds [0, seeds), the ones the
// simulation's clean run plays, with each planted bug in turn, and fails t for each bug
// that none of them caught through an invariant it breaks. run plays one schedule and
// returns its failure, whose first line names the invariant as spelled says (an
// invariant the simulation does not judge is not in spelled); a failure of another
// kind (a replica stuck at shutdown, say) is logged and does not count.
func requireEachPlantedBugCaught(t *testing.T, seeds int, run func(seed int64, m mutation) error, spelled map[invariant]string) {
	for _, m := range plantedBugs {
		start := time.Now()
		caught := false
		for seed := range int64(seeds) {
			err := run(seed, m.mutation)
			if err == nil {
				continue
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			by := slices.IndexFunc(m.breaks, func(i invariant) bool { return spelled[i] != "" && strings.Contains(first, spelled[i]) })
			if by < 0 {
				t.Logf("%s: seed %d failed, but not by %v, which this bug breaks: %s", m.name, seed, m.breaks, first)
				continue
			}
			t.Logf("%s: caught by its %s failure in %s: %s", m.name, m.breaks[by], time.Since(start).Round(time.Millisecond), first)
			caught = true
			break
		}
		if !caught {
			t.Errorf("%s: no failure by %v in the %d schedules of the clean run", m.name, m.breaks, seeds)
		}
	}
}
