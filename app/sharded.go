package app

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/app/shards"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options"
)

// shardedReplica is one replica of active-active mode (--shards above 1). The
// namespaces are cut into shards by the hash of their names (see package shards); each
// shard has a Lease, and a replica works on the shards whose Lease it holds, with the
// same election, drain-then-release and write fence as a single leader has for the
// whole cluster (leaderelection.Run, once per shard). What the replicas agree on lives
// in Leases only (see shards for their names):
//
//   - Every replica renews a membership Lease, so that each knows how many replicas
//     are live and holds at most its fair share, ceil(shards / live replicas): it
//     campaigns for free shards while below it and hands over (drains, then releases)
//     its highest-numbered shard while above it, so that a replica that joins gets
//     its share within a few retry periods and the shards of one that left are taken
//     over once their Leases expire.
//   - One replica, the holder of the base Lease, coordinates (shardCoordinator): it
//     cuts the namespaces where they are and moves the cuts when the shards grew
//     unbalanced. A new cut is an epoch: every holder drains and releases its shards,
//     the coordinator relabels each released (or expired) shard Lease with the new
//     epoch, and only once all are relabelled does the new epoch become active and
//     may be campaigned for. A shard Lease is only ever written by an election of its
//     own epoch (shards.GuardEpoch), so no two replicas ever work on overlapping
//     ranges, old or new.
//
// A shard that is lost (not renewed in time, or seen in another replica's hands) costs
// that shard only: its fence closes at once, its controllers drain and its informers
// stop, and the replica campaigns again for its fair share (leaderelection's
// KeepRunningOnLoss). A single leader exits instead, like kube-controller-manager; a
// replica holding several shards would otherwise lose all of them, and their warm
// caches, to one renewal that a busy apiserver answered late. Only a shard whose
// workers do not stop within --controller-shutdown-timeout still ends the process.
type shardedReplica struct {
	// base is --leader-elect-resource-name; namespace the Leases' namespace.
	base, namespace string
	// identity is this replica's holder identity in every Lease.
	identity string
	// shards is --shards.
	shards int
	// timings are the election's; a shard Lease and a membership Lease last
	// LeaseDuration.
	timings leaderelection.Timings
	// client reads and writes the Leases, with the election's request timeout.
	client kubernetes.Interface
	// probe asks the apiserver whether it filters by shard.
	probe kubernetes.Interface
	// recorders hands out the event recorders once the broadcaster started; events
	// records LeaderElection events on the shard Leases.
	recorders *eventRecorders
	events    resourcelock.EventRecorder
	// cluster is the factory of the cluster-scoped informers, shared by the shards;
	// clusterStop stops them once every shard's term ended.
	cluster     informers.SharedInformerFactory
	clusterStop <-chan struct{}
	// term runs the controllers on one shard until ctx is cancelled: its informers
	// with the shard's selector, then its workers, each write fenced by fence.
	term func(ctx context.Context, shard int, epoch int64, selector string, fence *leaderelection.Fence) error
	// ready learns when this replica campaigns (for /readyz).
	ready *readiness
	// coordinator weighs the namespaces and writes the plan while this replica holds
	// the base Lease.
	coordinator *shardCoordinator

	// leaseFactory has the one informer of the Leases of base, and only those; leases
	// lists them.
	leaseFactory informers.SharedInformerFactory
	leases       coordinationlisters.LeaseNamespaceLister
	// seen tells when each Lease last changed, by this replica's clock.
	seen observations

	mu sync.Mutex
	// elections are this replica's shard elections, campaigning or leading, by shard.
	elections map[int]*shardElection
	// running counts the elections' goroutines.
	running sync.WaitGroup
}

// shardElection is one shard's leaderelection.Run.
type shardElection struct {
	epoch   int64
	cancel  context.CancelFunc
	done    chan struct{}
	leading atomic.Bool
	// stopping is set once cancel was called.
	stopping bool
}

// run runs the replica until ctx is cancelled, then hands over every shard it holds
// (each drains its controllers, then releases its Lease), stops coordinating and
// leaves the membership, in that order.
func (r *shardedReplica) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	r.events = r.recorders.Recorder(eventComponent)
	r.coordinator.recorder = r.recorders.Recorder(eventComponent)
	if err := r.checkServerFilters(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	// The cluster-scoped informers stop after every term ended (the deferred calls
	// run after the handover at the end of run).
	clusterCtx, stopCluster := context.WithCancel(context.WithoutCancel(ctx))
	r.clusterStop = clusterCtx.Done()
	defer r.cluster.Shutdown()
	defer stopCluster()

	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
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
	defer r.leaseFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), leaseInformer.Informer().HasSynced) {
		return nil // shut down while starting
	}

	// Membership and coordination run until the shards are handed over.
	var background sync.WaitGroup
	background.Go(func() { r.keepMembership(leaseCtx) })
	background.Go(func() { r.coordinator.run(leaseCtx) })

	r.ready.setStandby()
	logger.Info("Sharded: campaigning for a fair share of the shards", "shards", r.shards,
		"leases", fmt.Sprintf("%s/%s-0…%d", r.namespace, r.base, r.shards-1))
	ticker := time.NewTicker(r.timings.RetryPeriod)
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

// reconcile compares the shards this replica holds with its fair share and starts or
// stops elections to meet it.
func (r *shardedReplica) reconcile(ctx context.Context) {
	logger := klog.FromContext(ctx)
	now := time.Now()
	all, err := r.leases.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing the shard Leases")
		return
	}
	r.seen.observe(all, now)

	r.mu.Lock()
	defer r.mu.Unlock()
	for shard, e := range r.elections {
		select {
		case <-e.done:
			delete(r.elections, shard)
		default:
		}
	}
	stop := func(shard int, why string) {
		e := r.elections[shard]
		if e.stopping {
			return
		}
		logger.Info("Handing over a shard", "shard", shard, "leading", e.leading.Load(), "reason", why)
		e.stopping = true
		e.cancel()
	}

	var (
		active, next *shards.Epoch
		byName       = map[string]*coordinationv1.Lease{}
		live         int
	)
	for _, l := range all {
		byName[l.Name] = l
		switch l.Labels[shards.LabelRole] {
		case shards.RolePlan:
			if active, next, err = shards.PlanOf(l); err != nil {
				logger.Error(err, "Ignoring an unreadable shard plan")
				active, next = nil, nil
			}
		case shards.RoleMember:
			if !r.seen.expired(l, now) {
				live++
			}
		}
	}
	if active == nil {
		return // the coordinator has not cut the namespaces yet
	}
	for shard, e := range r.elections {
		switch {
		case next != nil:
			stop(shard, fmt.Sprintf("the plan moves to epoch %d", next.Number))
		case e.epoch != active.Number:
			stop(shard, fmt.Sprintf("the shard belongs to epoch %d, the plan is at %d", e.epoch, active.Number))
		}
	}
	if next != nil {
		return
	}

	count := active.Plan.Shards()
	share := fairShare(count, live)
	var leading, campaigning []int
	for shard, e := range r.elections {
		switch {
		case e.stopping:
		case e.leading.Load():
			leading = append(leading, shard)
		default:
			campaigning = append(campaigning, shard)
		}
	}
	sort.Ints(leading)
	for _, shard := range campaigning {
		if l := byName[shards.ShardLeaseName(r.base, shard)]; l != nil && holder(l) != r.identity && !r.seen.expired(l, now) {
			stop(shard, "another replica holds it")
		}
	}
	if len(leading) > share {
		// One at a time: the next pass sees whether the others still need to go.
		stop(leading[len(leading)-1], fmt.Sprintf("holding %d shards, above the fair share of %d for %d live replicas", len(leading), share, live))
		return
	}
	wanted := share - len(leading)
	for _, shard := range campaigning {
		if !r.elections[shard].stopping {
			wanted--
		}
	}
	// Start where this replica's identity hashes to, so that replicas starting
	// together do not all campaign for shard 0 first.
	h := fnv.New32a()
	h.Write([]byte(r.identity))
	offset := int(h.Sum32() % uint32(count))
	for k := 0; k < count && wanted > 0; k++ {
		shard := (offset + k) % count
		l := byName[shards.ShardLeaseName(r.base, shard)]
		if _, ours := r.elections[shard]; ours || l == nil || l.Labels[shards.LabelEpoch] != active.Label() {
			continue
		}
		if holder(l) != "" && holder(l) != r.identity && !r.seen.expired(l, now) {
			continue
		}
		var expired *coordinationv1.Lease
		if holder(l) != "" && holder(l) != r.identity {
			expired = l
		}
		r.campaign(ctx, shard, *active, expired)
		wanted--
	}
}

// campaign starts the election of one shard under epoch; mu is held. expired is the
// shard's Lease when this replica saw it expire in another replica's hands: the
// election first releases it (see breakExpired).
func (r *shardedReplica) campaign(ctx context.Context, shard int, epoch shards.Epoch, expired *coordinationv1.Lease) {
	electionCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &shardElection{epoch: epoch.Number, cancel: cancel, done: make(chan struct{})}
	r.elections[shard] = e
	name := shards.ShardLeaseName(r.base, shard)
	selector := epoch.Plan.Selector(shard).String()
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "shard", shard, "epoch", epoch.Number)
	r.running.Go(func() {
		defer close(e.done)
		defer cancel()
		if expired != nil {
			r.breakExpired(electionCtx, expired, epoch)
		}
		fence := leaderelection.NewFence(r.namespace+"/"+name, r.timings.LeaseDuration, nil)
		err := leaderelection.Run(klog.NewContext(electionCtx, logger), leaderelection.Config{
			Client:            r.client,
			Leases:            shards.GuardEpoch(r.client.CoordinationV1(), r.namespace, epoch),
			Namespace:         r.namespace,
			Name:              name,
			Identity:          r.identity,
			LeaseDuration:     r.timings.LeaseDuration,
			RenewDeadline:     r.timings.RenewDeadline,
			RetryPeriod:       r.timings.RetryPeriod,
			EventRecorder:     r.events,
			Fence:             fence,
			KeepRunningOnLoss: true,
		}, func(ctx context.Context) error {
			e.leading.Store(true)
			defer e.leading.Store(false)
			klog.FromContext(ctx).Info("Working on a shard", "selector", selector)
			return r.term(ctx, shard, epoch.Number, selector, fence)
		})
		switch {
		case errors.Is(err, leaderelection.ErrLeaseLost):
			logger.Info("Lost a shard: its writes were fenced and its controllers drained; campaigning again for a fair share",
				"fenceRefusedWrites", fence.Refused())
		case err != nil:
			logger.Error(err, "Shard election ended with an error")
		}
	})
}

// checkServerFilters fails when the apiserver ignores shardSelector; a cluster whose
// default/kubernetes Service is not there yet is asked again for a few seconds.
func (r *shardedReplica) checkServerFilters(ctx context.Context) error {
	var filters bool
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		filters, err = shards.ServerFilters(ctx, r.probe)
		if errors.Is(err, shards.ErrUndetermined) {
			return false, nil
		}
		return err == nil, err
	})
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return fmt.Errorf("--shards=%d: %w", r.shards, err)
	case !filters:
		return errNoShardFiltering
	}
	klog.FromContext(ctx).Info("The apiserver filters lists and watches by shard")
	return nil
}

// breakExpired releases a shard Lease that this replica saw expire in another
// replica's hands, with the resourceVersion it saw, so that the write fails if the
// holder renewed since. It is the rule client-go's election acquires by (not renewed
// for the lease duration by the observer's clock), applied once by the observer that
// decided to campaign: the election itself would only start observing now and wait a
// whole lease duration more before taking the Lease.
func (r *shardedReplica) breakExpired(ctx context.Context, expired *coordinationv1.Lease, epoch shards.Epoch) {
	logger := klog.FromContext(ctx)
	if expired.Labels[shards.LabelEpoch] != epoch.Label() {
		return
	}
	released := expired.DeepCopy()
	released.Spec.HolderIdentity = nil
	_, err := r.client.CoordinationV1().Leases(r.namespace).Update(ctx, released, metav1.UpdateOptions{})
	if err != nil {
		logger.V(2).Info("Did not release an expired shard Lease; the election decides", "lease", expired.Name, "err", err)
		return
	}
	logger.Info("Released a shard Lease that expired in another replica's hands", "lease", expired.Name, "holder", holder(expired))
}

// status says, for /statusz, the plan, the shards this replica holds or campaigns
// for, and its fair share, e.g. "6 shards, plan epoch 2 | holding 1 [0x…, 0x…), 4 [0x…,
// 0x…) | campaigning for none | 3 live replicas, fair share 2 | coordinating".
func (r *shardedReplica) status() string {
	var (
		active, next *shards.Epoch
		live         int
		coordinator  string
	)
	all, _ := r.leases.List(labels.Everything())
	now := time.Now()
	for _, l := range all {
		switch {
		case l.Labels[shards.LabelRole] == shards.RolePlan:
			active, next, _ = shards.PlanOf(l)
		case l.Labels[shards.LabelRole] == shards.RoleMember && !r.seen.expired(l, now):
			live++
		case l.Name == r.base:
			coordinator = holder(l)
		}
	}
	parts := []string{fmt.Sprintf("%d shards", r.shards)}
	switch {
	case active == nil:
		parts[0] += ", no plan yet"
	case next != nil:
		parts[0] += fmt.Sprintf(", plan epoch %d handing over to %d", active.Number, next.Number)
	default:
		parts[0] += fmt.Sprintf(", plan epoch %d", active.Number)
	}
	r.mu.Lock()
	var held, campaigning []string
	for shard, e := range r.elections {
		switch {
		case e.leading.Load() && active != nil && e.epoch == active.Number:
			start, end := active.Plan.Bounds(shard)
			held = append(held, fmt.Sprintf("%d [%s, %s)", shard, start, end))
		case e.leading.Load():
			held = append(held, fmt.Sprintf("%d (epoch %d, handing over)", shard, e.epoch))
		default:
			campaigning = append(campaigning, strconv.Itoa(shard))
		}
	}
	r.mu.Unlock()
	sort.Strings(held)
	sort.Strings(campaigning)
	parts = append(parts, "holding "+namesOrNone(held), "campaigning for "+namesOrNone(campaigning),
		fmt.Sprintf("%d live replicas, fair share %d", live, fairShare(r.shards, live)))
	if coordinator == r.identity {
		parts = append(parts, "coordinating (cuts the namespaces)")
	}
	return strings.Join(parts, " | ")
}

// keepMembership renews this replica's membership Lease until ctx is cancelled.
func (r *shardedReplica) keepMembership(ctx context.Context) {
	logger := klog.FromContext(ctx)
	name := shards.MemberLeaseName(r.base, r.identity)
	renew := func() error {
		leases := r.client.CoordinationV1().Leases(r.namespace)
		now := metav1.NowMicro()
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.namespace,
				Labels: shards.Labels(r.base, shards.RoleMember)}}
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
	ticker := time.NewTicker(r.timings.LeaseDuration / 4)
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

func (r *shardedReplica) memberSpec(now metav1.MicroTime) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(r.identity),
		LeaseDurationSeconds: ptr.To(int32(r.timings.LeaseDuration.Seconds())),
		RenewTime:            &now,
	}
}

// leaveMembership deletes the membership Lease, so that the others count one replica
// fewer at once instead of after it expired.
func (r *shardedReplica) leaveMembership(logger klog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timings.RenewDeadline)
	defer cancel()
	name := shards.MemberLeaseName(r.base, r.identity)
	err := r.client.CoordinationV1().Leases(r.namespace).Delete(ctx, name, metav1.DeleteOptions{})
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

// holder returns a Lease's holder identity, "" when released.
func holder(l *coordinationv1.Lease) string {
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// observations remembers, per Lease, its resourceVersion and when this replica saw it
// change: like client-go's election, a Lease expires LeaseDurationSeconds after it was
// last seen to change by the observer's own clock, never by the writer's timestamps,
// so clock skew between replicas does not matter.
type observations struct {
	mu   sync.Mutex
	seen map[string]observation
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
			o.seen[l.Name] = observation{resourceVersion: l.ResourceVersion, at: now}
		}
	}
	for name := range o.seen {
		if !present[name] {
			delete(o.seen, name)
		}
	}
}

// expired reports whether l is released, or was not seen to change for its duration.
func (o *observations) expired(l *coordinationv1.Lease, now time.Time) bool {
	if holder(l) == "" {
		return true
	}
	o.mu.Lock()
	s, ok := o.seen[l.Name]
	o.mu.Unlock()
	if !ok {
		return false // not observed yet: assume it is held
	}
	d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	return now.Sub(s.at) > d
}

// errNoShardFiltering is returned when --shards is above 1 and the apiserver ignores
// shardSelector.
var errNoShardFiltering = errors.New("--shards needs an apiserver that filters lists and watches by shardSelector, " +
	"and this one ignores it (each replica would cache and act on every shard's objects): enable the alpha feature gate " +
	"on kube-apiserver with --feature-gates=ShardedListAndWatch=true (Kubernetes v1.37 or later), or run with --shards=1")

// newShardedReplica builds the replica from the process's configuration: manager is the
// single leader's controller manager, of which each shard runs a copy restricted to the
// shard, with its clients fenced by the shard's Lease.
func newShardedReplica(cfg *options.Config, manager *controllerManager, clients clientBuilder,
	client kubernetes.Interface, events *eventRecorders) (*shardedReplica, error) {
	le := cfg.LeaderElection
	timings := leaderelection.Timings{LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}
	electionClient, err := leaderelection.NewClient(cfg.RESTConfig, userAgent("leader-election"), timings)
	if err != nil {
		return nil, err
	}
	identity, err := leaderelection.NewIdentity()
	if err != nil {
		return nil, err
	}
	informerClient, err := clients.informerClient("cluster-informers")
	if err != nil {
		return nil, err
	}
	name, err := cache.NewInformerName(informerName + "-cluster")
	if err != nil {
		return nil, fmt.Errorf("naming the cluster-scoped informers: %w", err)
	}
	cluster := informers.NewSharedInformerFactoryWithOptions(informerClient, resyncPeriod(cfg.MinResyncPeriod),
		informers.WithTransform(clients.cacheTransform()), informers.WithInformerName(name))
	coordinatorConfig := rest.CopyConfig(cfg.RESTConfig)
	coordinatorConfig.UserAgent = userAgent("shard-coordinator")
	metadataClient, err := metadata.NewForConfig(coordinatorConfig)
	if err != nil {
		return nil, fmt.Errorf("building the shard coordinator's client: %w", err)
	}
	r := &shardedReplica{
		base:      le.ResourceName,
		namespace: le.ResourceNamespace,
		identity:  identity,
		shards:    cfg.Sharding.Shards,
		timings:   timings,
		client:    electionClient,
		probe:     client,
		recorders: events,
		cluster:   cluster,
		elections: map[int]*shardElection{},
	}
	r.leaseFactory = informers.NewSharedInformerFactoryWithOptions(electionClient, 0, informers.WithNamespace(r.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = shards.LabelSet + "=" + r.base }))
	r.leases = r.leaseFactory.Coordination().V1().Leases().Lister().Leases(r.namespace)
	r.term = func(ctx context.Context, shard int, epoch int64, selector string, fence *leaderelection.Fence) error {
		m := *manager
		shardClients := clients
		shardClients.fence = fence
		shardClients.shardTerm = fmt.Sprintf("shard %d, epoch %d, term %d", shard, epoch, time.Now().UnixMilli())
		m.clients = shardClients
		m.readiness = &readiness{}
		m.informerName = fmt.Sprintf("%s-shard-%d", informerName, shard)
		m.shard = &shardInformers{selector: selector, cluster: cluster, clusterStop: r.clusterStop}
		return m.run(ctx)
	}
	coordinatorClient, err := leaderelection.NewClient(cfg.RESTConfig, userAgent("shard-coordinator"), timings)
	if err != nil {
		return nil, err
	}
	r.coordinator = &shardCoordinator{
		replica: r,
		client:  coordinatorClient,
		weigh: func(ctx context.Context) (map[string]int64, error) {
			// The metadata client has no request timeout of its own (a list of every
			// pod may take long), so a response that never completes would stop the
			// coordination for good: one weighing gets weighTimeout, then fails and is
			// tried again at the next step.
			ctx, cancel := context.WithTimeout(ctx, weighTimeout)
			defer cancel()
			return podsPerNamespace(ctx, metadataClient)
		},
		threshold: cfg.Sharding.RebalanceThreshold,
		period:    cfg.Sharding.RebalancePeriod,
	}
	return r, nil
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
