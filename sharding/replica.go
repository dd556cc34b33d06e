package sharding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// Replica is one replica of active-active mode (--shards above 1). The
// namespaces are cut into shards by the hash of their names (see Plan); each
// shard has a Lease, and a replica works on the shards whose Lease it holds, with the
// same election, drain-then-release and write fence as a single leader has for the
// whole cluster (leaderelection.Run, once per shard). What the replicas agree on lives
// in Leases only (see leases.go for their names):
//
//   - Every replica renews a membership Lease, so that each knows how many replicas
//     are live and holds at most its fair share, ceil(shards / live replicas): it
//     campaigns for free shards while below it and hands over (drains, then releases)
//     its highest-numbered shard while above it, so that a replica that joins gets
//     its share within a few retry periods and the shards of one that left are taken
//     over once their Leases expire.
//   - One replica, the holder of the base Lease, coordinates (coordinator): it
//     cuts the namespaces where they are and moves the cuts when the shards grew
//     unbalanced. A new cut is an epoch: the holders of the shards whose range it
//     moves drain and release them, the coordinator relabels each released (or
//     expired) one with the new epoch, and only once all are relabelled does the new
//     epoch become active and may be campaigned for. A shard whose range stays keeps
//     its Lease, label and holder, and its workers never stop (Epoch.Since). A shard
//     Lease is only ever written by an election of the range its label names
//     (GuardEpoch), so no two replicas ever work on overlapping ranges, old or new.
//
// A shard whose renewals fail for the renew deadline pauses (its fence closes until a
// renewal succeeds; see leaderelection). A shard that is lost (seen in another
// replica's hands) costs that shard only: its fence closes at once, its controllers
// drain and its informers stop, and the replica campaigns again for its fair share, as
// a single leader stands by again. Only a shard whose workers do not stop within
// --controller-shutdown-timeout still ends the process.
type Replica struct {
	Config

	// recorder records LeaderElection events on the shard Leases and the plan's
	// changes on the plan Lease.
	recorder record.EventRecorder
	// clusterStop stops the cluster-scoped informers once every shard's term ended.
	clusterStop <-chan struct{}
	// coordinator weighs the namespaces and writes the plan while this replica holds
	// the base Lease.
	coordinator *coordinator

	// leaseFactory has the one informer of the Leases of Base, and only those; leases
	// lists them.
	leaseFactory informers.SharedInformerFactory
	leases       coordinationlisters.LeaseNamespaceLister
	// seen tells when each Lease last changed, by this replica's clock.
	seen observations
	// outOfRange counts the objects outside their shard that the apiserver sent (it
	// ignored shardSelector) and the shards' informers dropped; unfilteredAtStart is
	// set when the apiserver was seen not to filter at start.
	outOfRange        outOfRange
	unfilteredAtStart atomic.Bool

	mu sync.Mutex
	// elections are this replica's shard elections, campaigning or leading, by shard.
	elections map[int]*shardElection
	// running counts the elections' goroutines.
	running sync.WaitGroup
	// now is the clock of the decisions: the contact clock's, or the simulator's.
	now func() time.Time
	// contact advances only while the apiserver answers (see contactClock).
	contact *contactClock
}

// Config is what a replica needs from the process.
type Config struct {
	// mutation plants one known bug, for the simulation test only.
	mutation mutation

	// Base is --leader-elect-resource-name, Namespace the Leases' namespace.
	Base, Namespace string
	// Identity is this replica's holder identity in every Lease.
	Identity string
	// Shards is --shards.
	Shards int
	// Timings are the election's; a shard Lease and a membership Lease last
	// LeaseDuration.
	Timings leaderelection.Timings
	// RebalanceThreshold and RebalancePeriod are --shard-rebalance-threshold and
	// --shard-rebalance-period.
	RebalanceThreshold float64
	RebalancePeriod    time.Duration

	// Client reads and writes the Leases, with the election's request timeout;
	// CoordinatorClient writes the plan and relabels shard Leases, under its own user
	// agent; Probe asks the apiserver whether it filters by shard.
	Client, CoordinatorClient, Probe kubernetes.Interface
	// LeaseWatch, when set, is the client of each shard election's watch on its Lease
	// (see leaderelection.Config.LeaseWatch), so that an expired shard is taken at
	// expiry rather than at the next poll. Optional.
	LeaseWatch coordinationv1client.LeasesGetter
	// Weigh returns the number of pods per namespace (see WeighPods).
	Weigh func(ctx context.Context) (map[string]int64, error)
	// Recorder returns the process's event recorder; it is called once Run starts,
	// after the process's event broadcaster did.
	Recorder func() record.EventRecorder
	// Cluster is the factory of the cluster-scoped informers, shared by the shards.
	Cluster informers.SharedInformerFactory
	// Term runs the controllers on one shard until ctx is cancelled: its informers
	// restricted by term.Informers, then its workers, each write fenced by term.Fence.
	// It returns after the workers stopped, or an error wrapping
	// leaderelection.ErrControllersStillRunning when they did not within
	// --controller-shutdown-timeout.
	Term func(ctx context.Context, term Term) error
	// Campaigning is called once the replica campaigns for shards (for /readyz).
	Campaigning func()
	// Coordinating, when set, runs beside the coordination for as long as this replica
	// coordinates (holds the base Lease), until its ctx is cancelled; the coordination
	// ends only once it returned. The leader's watch for kube-controller-manager still
	// running the controllers (handover.Watch) runs here: one replica watches, as a
	// single leader does. Optional.
	Coordinating func(ctx context.Context)
	// Exit ends the process when a shard's workers did not stop in time; nil flushes
	// the logs and exits.
	Exit func(code int)
}

// Term is one shard's term, as handed to Config.Term.
type Term struct {
	// Shard and Epoch name the shard Lease held and the epoch that gave it its range.
	Shard int
	Epoch int64
	// Selector is the shard's range; Informers restricts a term's informers to it.
	Selector  apisharding.Selector
	Informers *Informers
	// Fence guards every write of the term: closed once the shard Lease may be lost.
	Fence *leaderelection.Fence
}

// shardElection is one shard's leaderelection.Run.
type shardElection struct {
	// label is the Epoch.Label of the shard's range under which it was started.
	label   string
	cancel  context.CancelFunc
	done    chan struct{}
	leading atomic.Bool
	// stopping is set once cancel was called.
	stopping bool
}

// Run runs the replica until ctx is cancelled, then hands over every shard it holds
// (each drains its controllers, then releases its Lease), stops coordinating and
// leaves the membership, in that order.
func (r *Replica) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	r.recorder = r.Recorder()
	if plantedMutation != "" {
		logger.Error(nil, "This binary was built with a planted bug, for a test of the tests: do not run it", "mutation", plantedMutation)
	}
	if err := r.checkServerFilters(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	// The cluster-scoped informers stop after every term ended (the deferred calls
	// run after the handover at the end of run).
	clusterCtx, stopCluster := context.WithCancel(context.WithoutCancel(ctx))
	r.clusterStop = clusterCtx.Done()
	defer r.Cluster.Shutdown()
	defer stopCluster()

	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	// Deferred calls run last first: the Lease informer stops, then the factory waits
	// for it, also when a SIGTERM comes before its cache synced.
	defer r.leaseFactory.Shutdown()
	defer stopLeases()
	leaseInformer := r.leaseFactory.Coordination().V1().Leases()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := leaseInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		return fmt.Errorf("watching the shard Leases: %w", err)
	}
	r.leaseFactory.Start(leaseCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), leaseInformer.Informer().HasSynced) {
		return nil // shut down while starting
	}

	// Membership and coordination run until the shards are handed over.
	var background sync.WaitGroup
	background.Go(func() { r.probe(leaseCtx) })
	background.Go(func() { r.keepMembership(leaseCtx) })
	background.Go(func() { r.coordinator.run(leaseCtx) })

	if r.Campaigning != nil {
		r.Campaigning()
	}
	logger.Info("Sharded: campaigning for a fair share of the shards", "shards", r.Shards,
		"leases", fmt.Sprintf("%s/%s-0…%d", r.Namespace, r.Base, r.Shards-1))
	ticker := time.NewTicker(r.Timings.RetryPeriod)
	defer ticker.Stop()
	for ctx.Err() == nil {
		r.reconcile(ctx)
		select {
		case <-ctx.Done():
		case <-changed:
		case <-ticker.C:
		}
	}

	// Leave first (stop renewing the membership, so that no renewal recreates it, and
	// delete it), so that the others count one replica fewer and campaign for this
	// one's shards while they drain; each is then taken as soon as it is released.
	stopLeases()
	background.Wait()
	r.leaveMembership(logger)
	logger.Info("Handing over the shards this replica holds")
	r.mu.Lock()
	for _, e := range r.elections {
		e.cancel()
	}
	r.mu.Unlock()
	r.running.Wait()
	return nil
}

// reconcile is the replica's driver: it observes the Leases, asks decideReplica which
// elections to stop and start (to hold its fair share of the active plan's shards) and
// does so.
func (r *Replica) reconcile(ctx context.Context) {
	logger := klog.FromContext(ctx)
	now := r.now()
	all, err := r.leases.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing the shard Leases")
		return
	}
	r.seen.observe(all, now)

	r.mu.Lock()
	defer r.mu.Unlock()
	view := replicaView{identity: r.Identity, base: r.Base, leases: all, seen: r.seen.snapshot(), elections: map[int]electionView{}, mutation: r.mutation}
	for shard, e := range r.elections {
		select {
		case <-e.done:
			delete(r.elections, shard)
		default:
			view.elections[shard] = electionView{label: e.label, leading: e.leading.Load(), stopping: e.stopping}
		}
	}
	actions, err := decideReplica(view, now)
	if err != nil {
		logger.Error(err, "Ignoring an unreadable shard plan")
	}
	for _, a := range actions {
		switch a.kind {
		case stopElection:
			e := r.elections[a.shard]
			logger.Info("Handing over a shard", "shard", a.shard, "leading", e.leading.Load(), "reason", a.why)
			e.stopping = true
			e.cancel()
		case campaign:
			r.campaign(ctx, a.shard, a.epoch, a.expired)
		}
	}
}

// campaign starts the election of one shard under epoch; mu is held. expired is the
// shard's Lease when this replica saw it expire in another replica's hands: the
// election first releases it (see breakExpired).
func (r *Replica) campaign(ctx context.Context, shard int, epoch Epoch, expired *coordinationv1.Lease) {
	electionCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	label := epoch.Label(shard)
	e := &shardElection{label: label, cancel: cancel, done: make(chan struct{})}
	r.elections[shard] = e
	name := ShardLeaseName(r.Base, shard)
	selector := epoch.Plan.Selector(shard)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "shard", shard, "epoch", label)
	r.running.Go(func() {
		defer close(e.done)
		defer cancel()
		if expired != nil {
			r.breakExpired(electionCtx, expired, label)
		}
		fence := leaderelection.NewFence(r.Namespace+"/"+name, r.Timings.LeaseDuration, nil)
		election := r.election(name)
		election.Leases = r.shardLeases(label)
		election.Fence, election.LeaseWatch = fence, r.LeaseWatch
		err := leaderelection.Run(klog.NewContext(electionCtx, logger), election, func(ctx context.Context) error {
			e.leading.Store(true)
			defer e.leading.Store(false)
			klog.FromContext(ctx).Info("Working on a shard", "selector", selector.String())
			return r.Term(ctx, Term{Shard: shard, Epoch: epoch.since(shard), Selector: selector, Fence: fence,
				Informers: &Informers{selector: selector.String(), filter: rangeFilter{selector: selector, report: &r.outOfRange},
					cluster: r.Cluster, clusterStop: r.clusterStop}})
		})
		r.electionEnded(logger, err, fence)
	})
}

// shardLeases returns the Lease client of an election of the range label names: one
// that writes the shard Lease only while it carries label (GuardEpoch).
func (r *Replica) shardLeases(label string) coordinationv1client.LeasesGetter {
	if r.mutation == mutationNoLabelGuard {
		return r.Client.CoordinationV1()
	}
	return GuardEpoch(r.Client.CoordinationV1(), r.Namespace, label)
}

// electionEnded logs how a shard's election ended, and ends the process when the
// term's workers did not stop within --controller-shutdown-timeout, whatever stopped
// them (a recut, a fair-share handover, a lost Lease): the fence keeps them from
// writing, but only an exit stops them for sure, and the replica could otherwise win
// the same shard back while they still run under informers that stopped.
func (r *Replica) electionEnded(logger klog.Logger, err error, fence *leaderelection.Fence) {
	switch {
	case errors.Is(err, leaderelection.ErrControllersStillRunning):
		logger.Error(err, "Exiting: a shard's workers did not stop within --controller-shutdown-timeout")
		r.Exit(1)
	case errors.Is(err, leaderelection.ErrLeaseLost):
		logger.Info("Lost a shard: its writes were fenced and its controllers drained; campaigning again for a fair share",
			"fenceRefusedWrites", fence.RefusedWrites())
	case err != nil:
		logger.Error(err, "Shard election ended with an error")
	}
}

// checkServerFilters asks whether the apiserver filters by shard (a cluster whose
// default/kubernetes Service is not there yet is asked again for a few seconds). One
// that does not is no reason to stop: every shard's informers drop what is outside the
// shard (see filter.go), so that a control plane in the middle of a rollout does not
// crash-loop the replicas; the replica then only warns that its memory is not reduced.
func (r *Replica) checkServerFilters(ctx context.Context) error {
	var filters bool
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		filters, err = ServerFilters(ctx, r.Probe)
		if errors.Is(err, ErrUndetermined) {
			return false, nil
		}
		return err == nil, err
	})
	logger := klog.FromContext(ctx)
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return fmt.Errorf("--shards=%d: %w", r.Shards, err)
	case !filters:
		r.unfilteredAtStart.Store(true)
		logger.Info("Warning: "+noShardFiltering, "shards", r.Shards)
		return nil
	}
	logger.Info("The apiserver filters lists and watches by shard")
	return nil
}

// breakExpired releases a shard Lease that this replica saw expire in another
// replica's hands, with the resourceVersion it saw, so that the write fails if the
// holder renewed since. It is the rule client-go's election acquires by (not renewed
// for the lease duration by the observer's clock), applied once by the observer that
// decided to campaign: the election itself would only start observing now and wait a
// whole lease duration more before taking the Lease.
func (r *Replica) breakExpired(ctx context.Context, expired *coordinationv1.Lease, label string) {
	logger := klog.FromContext(ctx)
	if expired.Labels[LabelEpoch] != label {
		return
	}
	released := expired.DeepCopy()
	released.Spec.HolderIdentity = nil
	_, err := r.Client.CoordinationV1().Leases(r.Namespace).Update(ctx, released, metav1.UpdateOptions{})
	if err != nil {
		logger.V(2).Info("Did not release an expired shard Lease; the election decides", "lease", expired.Name, "err", err)
		return
	}
	logger.Info("Released a shard Lease that expired in another replica's hands", "lease", expired.Name, "holder", holder(expired))
}

// keepMembership renews this replica's membership Lease until ctx is cancelled.
func (r *Replica) keepMembership(ctx context.Context) {
	logger := klog.FromContext(ctx)
	name := MemberLeaseName(r.Base, r.Identity)
	renew := func() error {
		leases := r.Client.CoordinationV1().Leases(r.Namespace)
		now := metav1.NowMicro()
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace,
				Labels: Labels(r.Base, RoleMember)}}
			lease.Spec = r.memberSpec(now)
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		lease.Spec = r.memberSpec(now)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	}
	// Four renewals per lease duration: the membership survives two or three failed
	// ones, and costs one write a second at the default 4s.
	ticker := time.NewTicker(r.Timings.LeaseDuration / 4)
	defer ticker.Stop()
	for {
		if err := renew(); err != nil && ctx.Err() == nil {
			logger.Error(err, "Renewing the membership Lease", "lease", name)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (r *Replica) memberSpec(now metav1.MicroTime) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(r.Identity),
		LeaseDurationSeconds: ptr.To(int32(r.Timings.LeaseDuration.Seconds())),
		RenewTime:            &now,
	}
}

// leaveMembership deletes the membership Lease, so that the others count one replica
// fewer at once instead of after it expired.
func (r *Replica) leaveMembership(logger klog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), r.Timings.RenewDeadline)
	defer cancel()
	name := MemberLeaseName(r.Base, r.Identity)
	err := r.Client.CoordinationV1().Leases(r.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "Deleting the membership Lease; the other replicas count this one until it expires", "lease", name)
	}
}

// fairShare is the most shards one of live replicas holds: ceil(shards / live). This
// replica counts itself even before its membership Lease is seen.
func fairShare(shards, live int) int {
	live = max(live, 1)
	return (shards + live - 1) / live
}

// observations remembers, per Lease, its resourceVersion and when this replica saw it
// change: like client-go's election, a Lease expires LeaseDurationSeconds after it was
// last seen to change by the observer's own clock, never by the writer's timestamps,
// so clock skew between replicas does not matter.
type observations struct {
	mu   sync.Mutex
	seen map[string]observation
	// mutation is Config.mutation, for the simulation test.
	mutation mutation
}

type observation struct {
	resourceVersion string
	at              time.Time
}

func (o *observations) observe(leases []*coordinationv1.Lease, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]observation{}
	}
	present := map[string]bool{}
	for _, l := range leases {
		present[l.Name] = true
		if s, ok := o.seen[l.Name]; !ok || s.resourceVersion != l.ResourceVersion {
			at := now
			if ok && o.mutation == mutationObserveIgnoresVersion {
				at = s.at
			}
			o.seen[l.Name] = observation{resourceVersion: l.ResourceVersion, at: at}
		}
	}
	for name := range o.seen {
		if !present[name] {
			delete(o.seen, name)
		}
	}
}

// snapshot returns a copy of the observations, for a decision.
func (o *observations) snapshot() map[string]observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]observation, len(o.seen))
	for k, v := range o.seen {
		out[k] = v
	}
	return out
}

// expired reports whether l has expired (LeaseExpired) by the observations. A Lease
// not observed before, or with another resourceVersion than observed, has just changed
// (a renewal, a new holder): it is observed now and is not expired. Callers that read
// the Lease cache themselves (the coordinator) may hold a newer version than the last
// observe saw; comparing it with the older version's time would take a Lease away from
// a holder that has just renewed it.
func (o *observations) expired(l *coordinationv1.Lease, now time.Time) bool {
	o.mu.Lock()
	changed := changedAt(o.seen, l)
	if changed == nil && holder(l) != "" {
		if o.seen == nil {
			o.seen = map[string]observation{}
		}
		o.seen[l.Name] = observation{resourceVersion: l.ResourceVersion, at: now}
	}
	o.mu.Unlock()
	return LeaseExpired(l, changed, now)
}

// noShardFiltering says that the apiserver ignores shardSelector.
const noShardFiltering = ("the apiserver ignores shardSelector: each replica receives every shard's objects and " +
	"drops those outside its shards itself, so it works correctly but its memory and traffic are not reduced; enable the " +
	"alpha feature gate on kube-apiserver with --feature-gates=ShardedListAndWatch=true (Kubernetes v1.37 or later)")

// New builds a replica from cfg; Run runs it.
func New(cfg Config) *Replica {
	if cfg.Exit == nil {
		cfg.Exit = func(code int) { klog.FlushAndExit(klog.ExitFlushTimeout, code) }
	}
	contact := &contactClock{maxGap: cfg.Timings.RetryPeriod + cfg.Timings.RequestTimeout(), real: time.Now}
	r := &Replica{Config: cfg, elections: map[int]*shardElection{}, now: contact.Now, contact: contact}
	r.seen.mutation = cfg.mutation
	r.leaseFactory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelSet + "=" + cfg.Base }))
	r.leases = r.leaseFactory.Coordination().V1().Leases().Lister().Leases(cfg.Namespace)
	r.coordinator = &coordinator{replica: r}
	r.outOfRange.first = r.stoppedFiltering
	return r
}

// stoppedFiltering says, once, that a shard's informers received an object outside the
// shard's range: the apiserver ignores shardSelector (it lacks the ShardedListAndWatch
// gate). The replica stays correct, since the object was dropped before any cache, but
// it now receives every shard's objects: its memory and traffic are no longer reduced.
func (r *Replica) stoppedFiltering(example metav1.Object) {
	const msg = "The apiserver ignores shardSelector and sends every shard's objects: mini-kcm drops those outside " +
		"the shard before caching them, so it stays correct, but its memory and traffic are no longer reduced; enable " +
		"--feature-gates=ShardedListAndWatch=true on every kube-apiserver"
	klog.Background().Info("Warning: "+msg, "example", klog.KObj(example), "metric", "mini_kcm_shard_out_of_range_objects_total")
	if r.recorder == nil {
		return
	}
	member, err := r.leases.Get(MemberLeaseName(r.Base, r.Identity))
	if err != nil {
		return // not created yet; the log and /statusz say it
	}
	r.recorder.Eventf(member, corev1.EventTypeWarning, "ShardFilterIgnored", msg)
}

// WeighPods returns a Config.Weigh that counts the pods per namespace through client,
// reading their metadata only and a page at a time (served from the apiserver's watch
// cache): the coordinator caches no pods of other shards and holds at most two pages
// of them while it weighs the namespaces. The metadata client has no request timeout
// of its own (a list of every pod may take long), so a response that never completes
// would stop the coordination for good: one weighing gets weighTimeout, then fails and
// is tried again at the next step.
func WeighPods(client metadata.Interface) func(ctx context.Context) (map[string]int64, error) {
	return func(ctx context.Context) (map[string]int64, error) {
		ctx, cancel := context.WithTimeout(ctx, weighTimeout)
		defer cancel()
		return podsPerNamespace(ctx, client)
	}
}

// podsPerNamespace counts the pods of every namespace, reading their metadata only and
// a page at a time (served from the apiserver's watch cache): the coordinator caches no
// pods of other shards and holds at most two pages of them while it weighs the
// namespaces, once per --shard-rebalance-period.
func podsPerNamespace(ctx context.Context, client metadata.Interface) (map[string]int64, error) {
	pods := client.Resource(corev1.SchemeGroupVersion.WithResource("pods"))
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return pods.List(ctx, opts)
	})
	p.PageSize = weighPageSize
	p.PageBufferSize = 1
	weights := map[string]int64{}
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		weights[obj.(*metav1.PartialObjectMetadata).Namespace]++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting the pods per namespace: %w", err)
	}
	return weights, nil
}

// weighPageSize is how many pods' metadata the coordinator reads per list call.
const weighPageSize = 500

// weighTimeout bounds one weighing: every page of every pod's metadata. 100 000 pods
// are 200 pages, a few seconds on an idle apiserver and well under a minute on the
// loaded 2-core one of the benchmarks.
const weighTimeout = 2 * time.Minute

// election returns what every election of this replica shares, for the Lease name:
// the client, the identity, the timings and the event recorder.
func (r *Replica) election(name string) leaderelection.Config {
	return leaderelection.Config{Client: r.Client, Namespace: r.Namespace, Name: name, Identity: r.Identity,
		Timings: r.Timings, EventRecorder: r.recorder}
}
