package sharding

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/test/simapiserver"
)

// The replica simulation runs three real replicas (New, Run: membership, the
// coordinator, decideReplica, and one leaderelection.Run per shard with its standby,
// fence, epoch guard and fenced transport) in a synctest bubble against the simulated
// apiserver of test/simapiserver, at the shipped election timings. Unlike sim_test.go,
// which steps a model of the elections, nothing here is a model of the product: the
// faults are the apiserver's and the operator's (stalls of the whole apiserver, a
// replica cut off, a replica's view of the Leases gone stale while its calls go
// through, crashes, SIGTERM, lost answers, slow calls, shard Leases deleted, the plan
// deleted with the shard Leases of the highest epoch, the plan edited by hand, the pods
// moving between namespaces so that the coordinator recuts). The checker reads the
// apiserver's log only:
//
//   - Exclusion: when the apiserver applied a controller write to a namespace, no
//     shard Lease named another replica with a label whose range holds the namespace.
//   - Authority: every accepted write to a namespace left its replica within the renew
//     deadline of the renewTime of an accepted write of a shard Lease naming that
//     replica with a label whose range holds the namespace (the fence's promise).
//   - Liveness: once the faults stop and the replicas settled, every namespace is
//     written, and on SIGTERM every replica returns without error.
//
// Each planted bug of mutation.go must fail some schedule of the ones make test runs.

// rsimTimings are the shipped election timings (see leaderelection's simTimings, which
// options' test pins; sharded mode runs the same flags).
var rsimTimings = leaderelection.Timings{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}

const (
	rsimReplicas   = 3
	rsimShards     = 4
	rsimNamespaces = 16
	rsimBase       = "mini-kcm"
	rsimNamespace  = "kube-system"
	// rsimWorkers controller workers per shard term each write every
	// rsimWriteInterval, to each namespace of the term's range in turn.
	rsimWorkers       = 2
	rsimWriteInterval = 250 * time.Millisecond
	// rsimFaults is how long faults start; rsimQuiet how long the schedule runs after
	// the last one ended, and rsimJudged the end of it in which every namespace must
	// be written.
	rsimFaults = 90 * time.Second
	rsimQuiet  = 90 * time.Second
	rsimJudged = 15 * time.Second
	// rsimShutdown bounds how long a replica takes to return after SIGTERM.
	rsimShutdown = 30 * time.Second
)

// rsimMaxWriteLatency bounds a controller write's way (the product's write allowance
// at 4s leases, 1s; see leaderelection's simMaxWriteLatency).
const rsimMaxWriteLatency = time.Second

// rsim is one schedule running.
type rsim struct {
	seed     int64
	mutation mutation
	// rng draws the schedule (replicas' start, weights, faults) before it plays, so
	// that a seed gives the same faults in every run; draw is the current fault's own
	// source, for what it picks when it strikes (a Lease, namespaces, a cut); terms
	// serves the replicas' terms, which draw in whatever order their goroutines run.
	rng, draw, terms *rsimRand
	api              *simapiserver.Server
	ctx              context.Context

	mu       sync.Mutex
	weights  map[string]int64
	replicas []*rsimReplica
	running  sync.WaitGroup
	// striking runs the faults that wait for what they provoke.
	striking sync.WaitGroup
	failures []string
	// lastFaultEnd is when the last fault ended.
	lastFaultEnd time.Time
}

// rsimRand is a source of randomness the simulation's goroutines may share.
type rsimRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRsimRand(seed, stream uint64) *rsimRand {
	return &rsimRand{r: rand.New(rand.NewPCG(seed, stream))}
}

func (r *rsimRand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.IntN(n)
}

func (r *rsimRand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}

func (r *rsimRand) Uint64() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Uint64()
}

// rsimReplica is one mini-kcm process.
type rsimReplica struct {
	id string
	// stall stalls the whole connection (a partition), leaseStall its Lease calls only
	// (renewals that cannot get through while the controllers' writes do), stale the
	// events of its Lease watches (a view gone stale while its calls go through).
	stall, leaseStall, stale *simapiserver.Stall
	cancel                   context.CancelFunc
	done                     chan struct{}
	err                      error
	// crashed is set once the process is killed: nothing it sends arrives any more.
	crashed bool
}

var rsimNamespaceNames = func() []string {
	var out []string
	for i := range rsimNamespaces {
		out = append(out, fmt.Sprintf("tenant-%02d", i))
	}
	return out
}()

func (s *rsim) tracef(format string, args ...any) { s.api.Tracef(format, args...) }

func (s *rsim) failf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fmt.Sprintf(format, args...))
}

// weigh is the replicas' Config.Weigh: the pods per namespace as they are now.
func (s *rsim) weigh(context.Context) (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.weights))
	for k, v := range s.weights {
		out[k] = v
	}
	return out, nil
}

// start starts a replica with the next identity.
func (s *rsim) start() *rsimReplica {
	s.mu.Lock()
	n := len(s.replicas)
	r := &rsimReplica{id: fmt.Sprintf("r%d", n), stall: &simapiserver.Stall{}, leaseStall: &simapiserver.Stall{}, stale: &simapiserver.Stall{},
		done: make(chan struct{})}
	s.replicas = append(s.replicas, r)
	s.mu.Unlock()
	requestTimeout := rsimTimings.RequestTimeout()
	slow := func(i int) *simapiserver.Link {
		return simapiserver.NewLink(r.id, r.leaseStall, uint64(s.seed), uint64(n*16+i), -1, requestTimeout/5, 5*requestTimeout/2)
	}
	leases := slow(0)
	leases.WatchStall = r.stale
	writes := simapiserver.NewLink(r.id, r.stall, uint64(s.seed), uint64(n*16+2), 0.05, rsimMaxWriteLatency/2, rsimMaxWriteLatency)
	client := s.api.Clientset(leases, requestTimeout)
	replica := New(Config{
		mutation:           s.mutation,
		Base:               rsimBase,
		Namespace:          rsimNamespace,
		Identity:           r.id,
		Shards:             rsimShards,
		Timings:            rsimTimings,
		RebalanceThreshold: 1.2, // the defaults of options.NewShardingOptions
		RebalancePeriod:    30 * time.Second,
		Client:             client,
		CoordinatorClient:  client,
		Probe:              rsimProbe{},
		LeaseWatch:         s.api.LeaseClient(slow(1), 0),
		Weigh:              s.weigh,
		Recorder:           func() record.EventRecorder { return &record.FakeRecorder{} },
		Cluster:            informers.NewSharedInformerFactory(client, 0),
		Term: func(ctx context.Context, term Term) error {
			return s.work(ctx, r, term, s.api.ControllerTransport(writes))
		},
		Exit: func(code int) {
			s.failf("%s: exit %d: a shard's workers did not stop in time", r.id, code)
		},
	})
	logger := funcr.New(func(prefix, args string) { s.tracef("%s: log: %s", r.id, args) }, funcr.Options{})
	ctx, cancel := context.WithCancel(klog.NewContext(s.ctx, logger))
	r.cancel = cancel
	s.tracef("%s: starts", r.id)
	s.running.Go(func() {
		defer close(r.done)
		r.err = replica.Run(ctx)
		s.tracef("%s: Run returned %v", r.id, r.err)
	})
	return r
}

// work is a shard term's controllers: workers that write to the namespaces of the
// term's range through the term's fenced transport until ctx is cancelled.
func (s *rsim) work(ctx context.Context, r *rsimReplica, term Term, apiserver http.RoundTripper) error {
	var mine []string
	for _, ns := range rsimNamespaceNames {
		if in, err := term.Selector.Matches(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}}); err == nil && in {
			mine = append(mine, ns)
		}
	}
	s.tracef("%s: works on shard %d (epoch %d): %v", r.id, term.Shard, term.Epoch, mine)
	if len(mine) == 0 {
		<-ctx.Done()
		return nil
	}
	rt := term.Fence.Transport("sim-controller")(apiserver)
	// Half the terms drain slowly: once stopped, their workers finish the syncs in
	// hand for up to 1.5s, writing as they go, as a controller's workers do.
	drain := time.Duration(0)
	if s.terms.IntN(2) == 0 {
		drain = time.Duration(s.terms.IntN(1500)) * time.Millisecond
	}
	var workers sync.WaitGroup
	for i := range rsimWorkers {
		workers.Go(func() {
			var drained <-chan time.Time
			refused := false
			for j := i; ; j++ {
				if ctx.Err() != nil && drained == nil {
					drained = time.After(drain)
				}
				select {
				case <-drained:
					return
				default:
				}
				url := fmt.Sprintf("https://apiserver.sim/api/v1/namespaces/%s/configmaps/worker-%d", mine[j%len(mine)], i)
				req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPut, url, nil)
				if err != nil {
					panic(err)
				}
				resp, err := rt.RoundTrip(req)
				if err == nil {
					_ = resp.Body.Close()
				} else if !refused {
					s.tracef("%s: shard %d's write refused: %v", r.id, term.Shard, err)
				}
				refused = err != nil
				select {
				case <-ctx.Done():
					if drained == nil {
						continue
					}
					<-time.After(rsimWriteInterval)
				case <-time.After(rsimWriteInterval):
				}
			}
		})
	}
	workers.Wait()
	return nil
}

// rsimProbe answers the start's probe as an apiserver that filters by shard does.
type rsimProbe struct{ kubernetes.Interface }

func (rsimProbe) CoreV1() corev1client.CoreV1Interface { return rsimProbeCore{} }

type rsimProbeCore struct{ corev1client.CoreV1Interface }

func (rsimProbeCore) Services(string) corev1client.ServiceInterface { return rsimProbeServices{} }

type rsimProbeServices struct{ corev1client.ServiceInterface }

func (rsimProbeServices) List(_ context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	if opts.ShardSelector != "" {
		return &corev1.ServiceList{}, nil
	}
	return &corev1.ServiceList{Items: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"}}}}, nil
}

// rsimFault is one fault of a schedule.
type rsimFault struct {
	at, length time.Duration
	kind       string
	// replica is the index among the running replicas the fault picks.
	replica int
	p       float64
	// seed is the fault's own source's, drawn with the schedule: what the fault picks
	// when it strikes does not shift the draws of the faults after it.
	seed uint64
}

// schedule draws the faults of a seed: about one every 6s over rsimFaults, after a
// warm-up of two lease durations.
func (s *rsim) schedule() []rsimFault {
	kinds := []string{"apiserver stall", "partition", "lease stall", "stale view", "crash", "sigterm", "lost answers", "slow calls",
		"delete shard lease", "delete highest epoch", "edit plan", "reweigh", "reweigh", "delete member lease",
		"delete during recut"}
	var faults []rsimFault
	for at := 2 * rsimTimings.LeaseDuration; at < rsimFaults; at += time.Duration(2000+s.rng.IntN(8000)) * time.Millisecond {
		f := rsimFault{at: at, kind: kinds[s.rng.IntN(len(kinds))], replica: s.rng.IntN(rsimReplicas)}
		// Stalls from half the renew deadline to five lease durations, log-uniformly.
		from, to := float64(rsimTimings.RenewDeadline/2), float64(5*rsimTimings.LeaseDuration)
		f.length = time.Duration(from * math.Pow(to/from, s.rng.Float64())).Round(time.Millisecond)
		f.p = 0.2 + 0.6*s.rng.Float64()
		f.seed = s.rng.Uint64()
		faults = append(faults, f)
	}
	// Every third schedule starts with a held Lease deleted during a recut, while the
	// three replicas hold two shards, one and one: the window that only a replica
	// holding one shard opens (see deleteDuringRecut) is rarely there later.
	if s.seed%3 == 0 {
		faults[0].kind = "delete during recut"
	}
	return faults
}

// live returns the replicas that run and were not crashed.
func (s *rsim) live() []*rsimReplica {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*rsimReplica
	for _, r := range s.replicas {
		select {
		case <-r.done:
		default:
			if !r.crashed {
				out = append(out, r)
			}
		}
	}
	return out
}

// inject starts fault f and returns what ends it (nil: nothing to end).
func (s *rsim) inject(f rsimFault) func() {
	s.draw = newRsimRand(f.seed, 0)
	live := s.live()
	if len(live) == 0 {
		return nil
	}
	r := live[f.replica%len(live)]
	s.tracef("FAULT %s (%s, p %.2f) on %s", f.kind, f.length, f.p, r.id)
	switch f.kind {
	case "apiserver stall":
		s.api.Stall(true)
		return func() { s.api.Stall(false) }
	case "partition":
		r.stall.Set(true)
		r.leaseStall.Set(true)
		return func() { s.recover(r, r.stall); s.recover(r, r.leaseStall) }
	case "lease stall":
		r.leaseStall.Set(true)
		return func() { s.recover(r, r.leaseStall) }
	case "stale view":
		r.stale.Set(true)
		return func() { r.stale.Set(false) }
	case "crash":
		// Nothing it sends arrives any more; the kubelet starts a new one later.
		s.mu.Lock()
		r.crashed = true
		r.stall.Set(true)
		r.leaseStall.Set(true)
		s.mu.Unlock()
		return func() { s.start() }
	case "sigterm":
		r.cancel()
		return func() { s.start() }
	case "lost answers":
		s.api.SetLostAnswers(f.p)
		return func() { s.api.SetLostAnswers(0) }
	case "slow calls":
		s.api.SetSlowCalls(f.p / 2)
		return func() { s.api.SetSlowCalls(0) }
	case "delete shard lease":
		name := ShardLeaseName(rsimBase, s.draw.IntN(rsimShards))
		s.tracef("deleted %v", s.api.Delete(func(l *coordinationv1.Lease) bool { return l.Name == name }))
	case "delete member lease":
		name := MemberLeaseName(rsimBase, r.id)
		s.tracef("deleted %v", s.api.Delete(func(l *coordinationv1.Lease) bool { return l.Name == name }))
	case "delete highest epoch":
		// kubectl delete lease -l: the plan, and the shard Leases of the highest epoch
		// number, so that the coordinator may number a new epoch as an old one.
		var highest int64
		for _, l := range s.api.Leases() {
			if n, ok := EpochOfLabel(l.Labels[LabelEpoch]); ok && l.Labels[LabelRole] == RoleShard {
				highest = max(highest, n)
			}
		}
		s.tracef("deleted %v", s.api.Delete(func(l *coordinationv1.Lease) bool {
			n, _ := EpochOfLabel(l.Labels[LabelEpoch])
			return l.Name == PlanLeaseName(rsimBase) || l.Labels[LabelRole] == RoleShard && n == highest
		}))
	case "edit plan":
		s.editPlan()
	case "reweigh":
		s.reweigh(s.draw, 4)
	case "delete during recut":
		// It waits for the recut it provokes, in the background, so that the faults
		// after it strike on time.
		draw := s.draw
		s.striking.Go(func() { s.deleteDuringRecut(draw) })
	}
	return nil
}

// recover ends a stall of r's connection, unless r crashed meanwhile.
func (s *rsim) recover(r *rsimReplica, stall *simapiserver.Stall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.crashed {
		stall.Set(false)
	}
}

// reweigh moves the pods of n namespaces.
func (s *rsim) reweigh(draw *rsimRand, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		ns := rsimNamespaceNames[draw.IntN(rsimNamespaces)]
		s.weights[ns] = int64(1 + draw.IntN(200))
	}
}

// unbalance piles pods into the namespaces of the active plan's first shard that has
// two or more, so that the coordinator cuts anew at its next weighing.
func (s *rsim) unbalance(draw *rsimRand) {
	plan := s.api.Lease(PlanLeaseName(rsimBase))
	if plan == nil {
		s.reweigh(draw, rsimNamespaces)
		return
	}
	active, _, err := PlanOf(plan)
	if err != nil || active == nil {
		s.reweigh(draw, rsimNamespaces)
		return
	}
	byShard := map[int][]string{}
	for _, ns := range rsimNamespaceNames {
		shard := active.Plan.Shard(ns)
		byShard[shard] = append(byShard[shard], ns)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for shard := range active.Plan.Shards() {
		if len(byShard[shard]) < 2 {
			continue
		}
		for _, ns := range rsimNamespaceNames {
			s.weights[ns] = 1
		}
		for _, ns := range byShard[shard] {
			s.weights[ns] = int64(300 + draw.IntN(300))
		}
		return
	}
}

// deleteDuringRecut unbalances the shards, waits (up to a minute) for the
// coordinator to propose a new cut, and then deletes one held shard Lease whose range
// moves, while its holder still works: the Lease the coordinator re-creates must keep
// the new ranges unserved until that holder stopped.
func (s *rsim) deleteDuringRecut(draw *rsimRand) {
	// A holder that is not the coordinator sees the Leases stale meanwhile, so that it
	// does not learn of the new cut and keeps its shard; once its Lease is deleted, its
	// Lease calls stall too (its writes get through), so that it keeps working on the
	// old range until its renew deadline, not only until it read the re-created Lease.
	// It holds one shard only, so that the handover waits for no other of its Leases.
	var victim *rsimReplica
	for _, r := range s.live() {
		holds := 0
		for _, l := range s.api.Leases() {
			if l.Labels[LabelRole] == RoleShard && ptr.Deref(l.Spec.HolderIdentity, "") == r.id {
				holds++
			}
		}
		if holds == 1 && r.id != s.api.Holder(rsimBase) {
			victim = r
			break
		}
	}
	if victim != nil {
		s.tracef("%s sees the Leases stale", victim.id)
		victim.stale.Set(true)
		defer time.AfterFunc(3*rsimTimings.RenewDeadline, func() {
			s.recover(victim, victim.stale)
			s.recover(victim, victim.leaseStall)
		})
	}
	s.unbalance(draw)
	for range 3000 {
		time.Sleep(20 * time.Millisecond)
		plan := s.api.Lease(PlanLeaseName(rsimBase))
		if plan == nil {
			continue
		}
		_, next, err := PlanOf(plan)
		if err != nil || next == nil {
			continue
		}
		// One of them (the victim's if it moves): the others are relabelled as their
		// holders release them, and the new ranges of those may overlap the deleted
		// one's old range.
		var moving []string
		name := ""
		for _, l := range s.api.Leases() {
			shard, ok := ShardOf(rsimBase, l.Name)
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			if ok && l.Labels[LabelRole] == RoleShard && holder != "" && l.Labels[LabelEpoch] != next.Label(shard) {
				moving = append(moving, l.Name)
				if victim != nil && holder == victim.id {
					name = l.Name
				}
			}
		}
		if len(moving) == 0 {
			continue
		}
		if name == "" {
			name = moving[draw.IntN(len(moving))]
		} else {
			s.tracef("%s's Lease calls stall", victim.id)
			victim.leaseStall.Set(true)
		}
		deleted := s.api.Delete(func(l *coordinationv1.Lease) bool { return l.Name == name })
		s.tracef("deleted %v during the recut to epoch %d", deleted, next.Number)
		return
	}
}

// editPlan moves one cut of the active plan by hand, keeping its epoch number and
// what it says about which epoch gave each shard its range.
func (s *rsim) editPlan() {
	cut := s.draw.Uint64()
	s.api.Edit(PlanLeaseName(rsimBase), func(plan *coordinationv1.Lease) {
		active, _, err := PlanOf(plan)
		if err != nil || active == nil || len(active.Plan.Cuts) == 0 {
			return
		}
		edited := *active
		edited.Plan.Cuts = slices.Clone(active.Plan.Cuts)
		k := int(cut % uint64(len(edited.Plan.Cuts)))
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
		edited.Plan.Cuts[k] = lo + cut%(hi-lo)
		plan.Annotations[AnnotationPlan] = edited.String()
	})
}

// run plays the schedule: the replicas start, the faults come and go, the replicas
// settle, then each gets SIGTERM.
func (s *rsim) run() {
	for range rsimReplicas {
		s.start()
		time.Sleep(time.Duration(s.rng.IntN(1000)) * time.Millisecond)
	}
	start := time.Now()
	type ending struct {
		at  time.Time
		end func()
	}
	var endings []ending
	endDue := func(now time.Time) {
		slices.SortFunc(endings, func(a, b ending) int { return a.at.Compare(b.at) })
		for len(endings) > 0 && !endings[0].at.After(now) {
			endings[0].end()
			endings = endings[1:]
		}
	}
	for _, f := range s.schedule() {
		for len(endings) > 0 && endings[0].at.Before(start.Add(f.at)) {
			time.Sleep(time.Until(endings[0].at))
			endDue(time.Now())
		}
		time.Sleep(time.Until(start.Add(f.at)))
		if end := s.inject(f); end != nil {
			endings = append(endings, ending{at: time.Now().Add(f.length), end: end})
			slices.SortFunc(endings, func(a, b ending) int { return a.at.Compare(b.at) })
		}
	}
	for len(endings) > 0 {
		time.Sleep(time.Until(endings[0].at))
		endDue(time.Now())
	}
	s.striking.Wait()
	s.lastFaultEnd = time.Now()
	s.tracef("faults end")
	time.Sleep(rsimQuiet)
	s.tracef("SIGTERM to every replica")
	s.mu.Lock()
	replicas := slices.Clone(s.replicas)
	s.mu.Unlock()
	for _, r := range replicas {
		r.cancel()
	}
	// A replica returns within the handover's bounds: its shards' workers drain and
	// each Lease is released within a request timeout or two.
	deadline := time.After(rsimShutdown)
	for _, r := range replicas {
		select {
		case <-r.done:
		case <-deadline:
			stacks := make([]byte, 1<<22)
			stacks = stacks[:runtime.Stack(stacks, true)]
			s.failf("%s did not return within %s of SIGTERM; the goroutines:\n%s", r.id, rsimShutdown, stacks)
			deadline = nil
		}
	}
	s.running.Wait()
	s.api.Wait()
	for _, r := range replicas {
		if r.err != nil {
			s.failf("%s: Run returned %v", r.id, r.err)
		}
	}
}

// rsimRange is the range of hashes a LabelEpoch value names; ok is false for a label
// of no range (a shard beyond the plan's count).
func rsimRange(label string) (first, last uint64, ok bool) {
	_, bounds, found := strings.Cut(label, ".")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(bounds, "-")
	if !found {
		return 0, 0, false
	}
	first, err1 := strconv.ParseUint(a, 16, 64)
	last, err2 := strconv.ParseUint(b, 16, 64)
	return first, last, err1 == nil && err2 == nil
}

func rsimCovers(l *coordinationv1.Lease, hash uint64) bool {
	first, last, ok := rsimRange(l.Labels[LabelEpoch])
	return ok && l.Labels[LabelRole] == RoleShard && first <= hash && hash <= last
}

// judge checks the apiserver's log (see the top of the file).
func (s *rsim) judge() {
	hashes := map[string]uint64{}
	for _, ns := range rsimNamespaceNames {
		hashes[ns] = Hash(ns)
	}
	// renewed holds, per replica and label, the renewTime of the latest accepted
	// shard Lease write naming the replica under that label.
	renewed := map[string]map[string]time.Time{}
	written := map[string]bool{}
	judgedFrom := s.lastFaultEnd.Add(rsimQuiet - rsimJudged)
	var exclusion, authority []string
	s.api.Replay(func(h simapiserver.LeaseWrite) {
		if h.Verb == "deleted" || h.Lease.Labels[LabelRole] != RoleShard {
			return
		}
		holder := ptr.Deref(h.Lease.Spec.HolderIdentity, "")
		if holder == "" || h.Record.RenewTime.IsZero() {
			return
		}
		if renewed[holder] == nil {
			renewed[holder] = map[string]time.Time{}
		}
		renewed[holder][h.Lease.Labels[LabelEpoch]] = h.Record.RenewTime.Time
	}, func(w simapiserver.Write, leases map[string]*coordinationv1.Lease) {
		hash := hashes[w.Namespace]
		if !w.At.Before(judgedFrom) {
			written[w.Namespace] = true
		}
		for _, l := range leases {
			if other := ptr.Deref(l.Spec.HolderIdentity, ""); other != w.By && other != recreatedHolder && other != "" && rsimCovers(l, hash) {
				exclusion = append(exclusion, fmt.Sprintf("%s's write to %s (sent %s) applied at %s while %s named %s for %s",
					w.By, w.Namespace, s.api.Since(w.Sent), s.api.Since(w.At), l.Name, other, l.Labels[LabelEpoch]))
			}
		}
		var latest time.Time
		for label, at := range renewed[w.By] {
			if first, last, ok := rsimRange(label); ok && first <= hash && hash <= last && at.After(latest) {
				latest = at
			}
		}
		// The renewTime is kept to the microsecond.
		switch {
		case latest.IsZero():
			authority = append(authority, fmt.Sprintf("%s's write to %s sent at %s, applied at %s: no accepted write of a shard "+
				"Lease ever named it with a range holding the namespace", w.By, w.Namespace, s.api.Since(w.Sent), s.api.Since(w.At)))
		case w.Sent.Sub(latest) > rsimTimings.RenewDeadline+time.Microsecond:
			authority = append(authority, fmt.Sprintf("%s's write to %s sent at %s, applied at %s: its latest accepted renewal "+
				"of a shard Lease holding the namespace was sent at %s, more than the renew deadline before",
				w.By, w.Namespace, s.api.Since(w.Sent), s.api.Since(w.At), s.api.Since(latest)))
		}
	})
	for kind, found := range map[string][]string{"exclusion": exclusion, "authority": authority} {
		if len(found) > 0 {
			s.failf("%s: %d writes, the first: %s", kind, len(found), found[0])
		}
	}
	var unwritten []string
	for _, ns := range rsimNamespaceNames {
		if !written[ns] {
			unwritten = append(unwritten, ns)
		}
	}
	if len(unwritten) > 0 {
		s.failf("liveness: %v not written in the last %s of the %s after the faults", unwritten, rsimJudged, rsimQuiet)
	}
}

// rsimStats add up what the schedules did, to show they reach what they mean to.
var rsimStats struct{ writes, leaseWrites, takeovers atomic.Int64 }

// runReplicaSim plays one schedule in a bubble of its own and returns the faults it
// struck (their trace lines) and its failure.
func runReplicaSim(t *testing.T, seed int64, m mutation, verbose bool) ([]string, error) {
	var err error
	var faults []string
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &rsim{seed: seed, mutation: m, rng: newRsimRand(uint64(seed), 0), terms: newRsimRand(uint64(seed), 1), api: simapiserver.New(), ctx: ctx,
			weights: map[string]int64{}}
		for _, ns := range rsimNamespaceNames {
			s.weights[ns] = int64(1 + s.rng.IntN(50))
		}
		s.run()
		s.judge()
		history := s.api.History()
		rsimStats.writes.Add(int64(len(s.api.Writes())))
		rsimStats.leaseWrites.Add(int64(len(history)))
		// A takeover: a shard Lease acquired by another replica than its last holder,
		// released by then or not.
		last := map[string]string{}
		for _, h := range history {
			if h.Verb == "deleted" || h.Lease.Labels[LabelRole] != RoleShard || h.Record.HolderIdentity == "" {
				continue
			}
			if before := last[h.Name]; before != "" && before != recreatedHolder && before != h.Record.HolderIdentity {
				rsimStats.takeovers.Add(1)
			}
			last[h.Name] = h.Record.HolderIdentity
		}
		trace := s.api.Trace()
		for _, line := range trace {
			if strings.Contains(line, " FAULT ") {
				faults = append(faults, line)
			}
		}
		if verbose {
			t.Logf("seed %d:\n%s", seed, strings.Join(trace, "\n"))
		}
		if len(s.failures) > 0 {
			err = fmt.Errorf("seed %d: %s\ntrace (last 80 lines; -sim-seed=%d -run TestReplicaSim prints all):\n%s", seed,
				strings.Join(s.failures, "\n"), seed, strings.Join(trace[max(0, len(trace)-80):], "\n"))
		}
	})
	return faults, err
}

// quietErrorHandlers drops what utilruntime.HandleError is given (the reflectors'
// failed lists, for one) while a test runs. Its default handlers also rate-limit
// themselves by the wall-clock time of the last error, taken at init: in a bubble,
// whose clock starts in 2000, that wait is decades long and the reflector calling it
// never retries.
func quietErrorHandlers(t *testing.T) {
	handlers := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(context.Context, error, string, ...any) {}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = handlers })
}

// playReplicaSims plays the schedules of seeds [0, seeds) with mutation m, one after
// the other (each bubble runs its replicas' goroutines on every CPU), and returns the
// first failure.
func playReplicaSims(t *testing.T, seeds int, m mutation) error {
	for seed := range int64(seeds) {
		if _, err := runReplicaSim(t, seed, m, false); err != nil {
			return err
		}
	}
	return nil
}

// rsimSeedCount is the number of replica schedules: SHARDING_REPLICA_SIM_SEEDS, else
// the 60 of make test (about 0.2s each). The planted bugs play the same ones: in five
// runs measured each was caught by seed 14 at the latest.
func rsimSeedCount(t *testing.T) int { return seedCount(t, "SHARDING_REPLICA_SIM_SEEDS", 60) }

// skipUnderRace skips a replica simulation test in a race build, loudly: make
// test-unit runs it again without the race detector.
func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIPPED under the race detector, whose runtime crashed in these bubbles (see raceEnabled): " +
			"make test-unit runs this test again without it (go test -run '^TestReplicaSim' ./sharding/)")
	}
}

func TestReplicaSimNeverLetsTwoReplicasWriteOneNamespace(t *testing.T) {
	skipUnderRace(t)
	quietKlog(t)
	quietErrorHandlers(t)
	if *simSeed >= 0 {
		if _, err := runReplicaSim(t, *simSeed, mutation(*simMutation), true); err != nil {
			t.Fatal(err)
		}
		return
	}
	seeds := rsimSeedCount(t)
	start := time.Now()
	if err := playReplicaSims(t, seeds, noMutation); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d schedules in %s: %d controller writes and %d Lease writes accepted, %d shard Leases taken from another holder",
		seeds, time.Since(start).Round(time.Millisecond), rsimStats.writes.Load(), rsimStats.leaseWrites.Load(), rsimStats.takeovers.Load())
	if rsimStats.takeovers.Load() == 0 {
		t.Error("no schedule took a shard Lease from another holder: the faults no longer reach a takeover")
	}
}

// Each planted bug must fail one of the schedules the clean run plays, through the
// invariant it breaks.
func TestReplicaSimCatchesEachPlantedBug(t *testing.T) {
	skipUnderRace(t)
	quietKlog(t)
	quietErrorHandlers(t)
	requireEachPlantedBugCaught(t, rsimSeedCount(t), func(seed int64, m mutation) error {
		_, err := runReplicaSim(t, seed, m, false)
		return err
	}, map[invariant]string{exclusion: ": exclusion: ", authority: ": authority: ", liveness: ": liveness: "})
}

// A seed names its schedule: played twice, it strikes the same faults at the same
// (virtual) times, with the same lengths and on the same replicas. The replicas'
// goroutines interleave as the runtime runs them, which no seed fixes, so what the
// replicas do in between may differ; the faults, what the seed draws, may not.
func TestReplicaSimReplaysEachScheduleFromItsSeed(t *testing.T) {
	skipUnderRace(t)
	quietKlog(t)
	quietErrorHandlers(t)
	for _, seed := range []int64{0, 1, 2} {
		first, err := runReplicaSim(t, seed, noMutation, false)
		if err != nil {
			t.Fatal(err)
		}
		again, err := runReplicaSim(t, seed, noMutation, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) == 0 {
			t.Fatalf("seed %d struck no fault", seed)
		}
		if !slices.Equal(first, again) {
			t.Errorf("seed %d struck other faults the second time:\nfirst:\n%s\nagain:\n%s", seed, strings.Join(first, "\n"), strings.Join(again, "\n"))
		}
	}
}
