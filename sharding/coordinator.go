package sharding

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// coordinator cuts the namespaces into shards and moves the cuts, on the replica
// that holds the base Lease (see Replica for how the replicas agree). It writes
// Leases only: the plan Lease's annotations and the shard Leases' epoch labels, each
// with the resourceVersion it read, so that a coordinator that lost its Lease without
// noticing can at worst fail a write, never undo its successor's.
type coordinator struct {
	replica *Replica

	// weighed is when the coordinator last weighed the shards and cost how long that
	// took; every is the interval to the next weighing, 0 right after a cut (see
	// weighDue).
	weighed     time.Time
	cost, every time.Duration
	// coordinating is set while this replica holds the base Lease, for /statusz.
	coordinating atomic.Bool
}

// firstLook is the interval to the first weighing after a cut, which doubles after
// every weighing up to --shard-rebalance-period: a cluster whose tenants are being
// created is looked at more often than a settled one.
const firstLook = 10 * time.Second

// weighPause bounds the share of the time spent weighing, whose paged list of every
// pod's metadata costs the apiserver about a second of CPU per 30 000 pods: the next
// weighing waits at least weighPause times as long as the last one took (5%).
const weighPause = 20

// weighDue reports whether the coordinator should weigh the shards now.
func (c *coordinator) weighDue(now time.Time) bool {
	every := c.every
	if every == 0 {
		every = min(firstLook, c.replica.RebalancePeriod)
	}
	return now.Sub(c.weighed) >= max(every, weighPause*c.cost)
}

// weigh weighs the namespaces and schedules the next weighing.
func (c *coordinator) weigh(ctx context.Context) (map[string]int64, error) {
	start := c.replica.now()
	weights, err := c.replica.Weigh(ctx)
	c.weighed = c.replica.now()
	c.cost = c.weighed.Sub(start)
	c.every = min(2*max(c.every, firstLook/2), c.replica.RebalancePeriod)
	return weights, err
}

// run campaigns for the base Lease and coordinates while holding it, until ctx is
// cancelled. Losing the base Lease only ends the coordination (the shards' own Leases
// guard the work), so it campaigns again.
func (c *coordinator) run(ctx context.Context) {
	r := c.replica
	for ctx.Err() == nil {
		election := r.election(r.Base)
		err := leaderelection.Run(ctx, election, c.coordinate)
		if err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Info("Stopped coordinating the shards; campaigning again", "reason", err)
		}
	}
}

// coordinate runs one step every retry period until ctx is cancelled.
func (c *coordinator) coordinate(ctx context.Context) error {
	klog.FromContext(ctx).Info("Coordinating the shards", "shards", c.replica.Shards)
	c.coordinating.Store(true)
	defer c.coordinating.Store(false)
	if beside := c.replica.Coordinating; beside != nil {
		besideCtx, cancel := context.WithCancel(ctx)
		var running sync.WaitGroup
		running.Go(func() { beside(besideCtx) })
		defer func() {
			cancel()
			running.Wait()
		}()
	}
	c.every = 0
	ticker := time.NewTicker(c.replica.Timings.RetryPeriod)
	defer ticker.Stop()
	for {
		if err := c.step(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Coordinating the shards")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// step moves the plan one step on: it writes the first plan, completes a handover in
// progress, or starts one when the shard count changed or the shards grew unbalanced.
func (c *coordinator) step(ctx context.Context) error {
	r := c.replica
	logger := klog.FromContext(ctx)
	plan, err := r.leases.Get(PlanLeaseName(r.Base))
	if apierrors.IsNotFound(err) {
		weights, err := c.replica.Weigh(ctx)
		if err != nil {
			return err
		}
		// An epoch never repeats: the shard Leases may still carry the epoch of the
		// deleted plan, and a handover compares labels.
		first := Epoch{Number: c.nextEpochNumber(nil, nil), Plan: Balanced(weights, r.Shards)}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: PlanLeaseName(r.Base), Namespace: r.Namespace,
			Labels:      Labels(r.Base, RolePlan),
			Annotations: map[string]string{AnnotationNext: first.String()},
		}}
		if _, err := c.replica.CoordinatorClient.CoordinationV1().Leases(r.Namespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the plan Lease: %w", err)
		}
		logger.Info("Cut the namespaces into shards", "epoch", first.Number, "plan", first.Plan.String(), "namespaces", len(weights))
		return nil
	}
	if err != nil {
		return err
	}
	active, next, err := PlanOf(plan)
	if err != nil {
		return err
	}
	c.forgetDeparted(ctx)
	if next == nil && active != nil {
		// Repair the active epoch's Leases: create the missing ones (deleted by hand),
		// and relabel, once released or expired, one that carries another label (the
		// plan was edited by hand, or a stale coordinator re-created it), which no
		// replica would ever campaign for. Replicas campaign only while every Lease
		// carries the active labels.
		c.handOver(ctx, *active)
	}
	switch {
	case next != nil:
		if !c.handOver(ctx, *next) {
			return nil
		}
		updated := plan.DeepCopy()
		updated.Annotations[AnnotationPlan] = next.String()
		delete(updated.Annotations, AnnotationNext)
		if updated, err = c.replica.CoordinatorClient.CoordinationV1().Leases(r.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("activating plan epoch %d: %w", next.Number, err)
		}
		logger.Info("Activated a shard plan: the shards may be campaigned for", "epoch", next.Number, "plan", next.Plan.String())
		c.every = 0 // look again soon
		c.replica.recorder.Eventf(updated, corev1.EventTypeNormal, "ShardPlanActive", "Epoch %d with %d shards is active: %s",
			next.Number, next.Plan.Shards(), next.Plan.String())
		return nil
	case active == nil || active.Plan.Shards() != r.Shards:
		weights, err := c.replica.Weigh(ctx)
		if err != nil {
			return err
		}
		return c.propose(ctx, plan, successor(active, c.nextEpochNumber(active, next), Balanced(weights, r.Shards)),
			fmt.Sprintf("--shards=%d", r.Shards))
	case c.weighDue(c.replica.now()):
		weights, err := c.weigh(ctx)
		if err != nil {
			return err
		}
		current := Imbalance(active.Plan.Loads(weights))
		candidate := Balanced(weights, r.Shards)
		better := Imbalance(candidate.Loads(weights))
		logger.V(2).Info("Weighed the shards", "imbalance", current, "threshold", c.replica.RebalanceThreshold, "balancedImbalance", better)
		if current <= c.replica.RebalanceThreshold {
			return nil
		}
		// Moving the cuts pauses every shard, so only for a clear gain.
		if better*1.1 >= current {
			logger.Info("The shards are unbalanced, but no cut of these namespaces is clearly better; keeping the cuts",
				"imbalance", current, "threshold", c.replica.RebalanceThreshold, "balancedImbalance", better)
			return nil
		}
		return c.propose(ctx, plan, successor(active, c.nextEpochNumber(active, next), candidate),
			fmt.Sprintf("imbalance %.2f above the threshold %.2f; the new cut has %.2f", current, c.replica.RebalanceThreshold, better))
	}
	return nil
}

// successor returns the epoch number with plan p after active: with the active ranges
// that p keeps, or all new when there is no active plan.
func successor(active *Epoch, number int64, p Plan) Epoch {
	if active == nil {
		return Epoch{Number: number, Plan: p}
	}
	return active.Next(number, p)
}

// forgetDeparted deletes the membership Leases of replicas that stopped renewing them
// (killed, or partitioned for a lease duration), so that they do not pile up; a replica
// that comes back creates its Lease again. The delete is conditional on the
// resourceVersion that was seen to expire.
func (c *coordinator) forgetDeparted(ctx context.Context) {
	r := c.replica
	members, err := r.leases.List(labelsOf(r.Base, RoleMember))
	if err != nil {
		return
	}
	now := r.now()
	for _, m := range members {
		if !r.seen.expired(m, now) {
			continue
		}
		err := c.replica.CoordinatorClient.CoordinationV1().Leases(r.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &m.ResourceVersion},
		})
		if err == nil {
			klog.FromContext(ctx).Info("Forgot a replica that stopped renewing its membership", "replica", holder(m))
		}
	}
}

// nextEpochNumber returns an epoch number above every one in use: the plan's active
// and next ones and every shard Lease's label. Epochs must never repeat (a deleted plan
// Lease would otherwise restart them at 1): a handover waits for every shard Lease to
// carry the next epoch, and a Lease that already carried it would count as handed over
// while its holder still works on an old range.
func (c *coordinator) nextEpochNumber(active, next *Epoch) int64 {
	var highest int64
	for _, e := range []*Epoch{active, next} {
		if e != nil {
			highest = max(highest, e.Number)
		}
	}
	r := c.replica
	if all, err := r.leases.List(labelsOf(r.Base, RoleShard)); err == nil {
		for _, l := range all {
			if n, ok := EpochOfLabel(l.Labels[LabelEpoch]); ok {
				highest = max(highest, n)
			}
		}
	}
	return highest + 1
}

// createShardLease creates shard's Lease with epoch's label, held by the coordinator
// for a lease duration. A shard Lease that is missing may have been deleted under a
// holder whose fence is still open; the replicas take a held Lease only once they saw
// it unchanged for its duration, while that holder, reading another holder or no
// Lease, stops renewing at once. (The simulator found a released one taken while the
// deleted Lease's holder still worked on the same namespaces.)
//
// It reads the plan from the apiserver first and creates the Lease only with the label
// that plan gives it (its next epoch's, or else its active one's): the Lease cache may
// be behind, and a coordinator that saw an older plan would otherwise re-create the
// Lease with the label of a range that a newer epoch moved, which a replica that saw
// the older plan too could then take. Only Create is not conditional; this read
// makes it as good as conditional while the coordinator's own fence is open, since no
// successor can change the plan before that fence closes.
func (c *coordinator) createShardLease(ctx context.Context, shard int, epoch Epoch) error {
	r := c.replica
	plan, err := r.CoordinatorClient.CoordinationV1().Leases(r.Namespace).Get(ctx, PlanLeaseName(r.Base), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the plan before creating shard %d's Lease: %w", shard, err)
	}
	active, next, err := PlanOf(plan)
	if err != nil {
		return err
	}
	if next != nil {
		active = next
	}
	if active == nil || active.Label(shard) != epoch.Label(shard) {
		return fmt.Errorf("not creating shard %d's Lease with label %s: the plan has moved on since the Lease cache showed it", shard, epoch.Label(shard))
	}
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ShardLeaseName(r.Base, shard), Namespace: r.Namespace, Labels: withEpoch(Labels(r.Base, RoleShard), epoch, shard)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(recreatedHolder),
			LeaseDurationSeconds: ptr.To(int32(r.Timings.LeaseDuration.Seconds())),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
	if r.mutation == mutationCreateReleased {
		lease.Spec.HolderIdentity = nil
	}
	_, err = r.CoordinatorClient.CoordinationV1().Leases(r.Namespace).Create(ctx, lease, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		klog.FromContext(ctx).Error(err, "Creating a shard Lease", "shard", shard)
	}
	return err
}

// recreatedHolder holds a recreated shard Lease until it expires.
const recreatedHolder = "recreated-by-the-shard-coordinator"

// propose writes next as the plan's next epoch, which starts the handover.
func (c *coordinator) propose(ctx context.Context, plan *coordinationv1.Lease, next Epoch, why string) error {
	r := c.replica
	updated := plan.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[AnnotationNext] = next.String()
	updated, err := c.replica.CoordinatorClient.CoordinationV1().Leases(r.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("proposing plan epoch %d: %w", next.Number, err)
	}
	moved := "every shard"
	if active, _, err := PlanOf(plan); err == nil && active != nil {
		moved = fmt.Sprintf("the shards whose range moves, %v", active.Moved(next))
	}
	klog.FromContext(ctx).Info("Moving the shard cuts: handing over "+moved, "epoch", next.Number, "plan", next.Plan.String(), "reason", why)
	c.replica.recorder.Eventf(updated, corev1.EventTypeNormal, "ShardPlanChanging", "Handing %s over to epoch %d (%s)", moved, next.Number, why)
	return nil
}

// handOver carries out decideHandOver on the shard Leases in the cache: it creates the
// missing ones and relabels the released (or expired) ones with next's epoch, and
// reports whether all carry it.
func (c *coordinator) handOver(ctx context.Context, next Epoch) bool {
	r := c.replica
	logger := klog.FromContext(ctx)
	leases := c.replica.CoordinatorClient.CoordinationV1().Leases(r.Namespace)
	all, err := r.leases.List(labelsOf(r.Base, RoleShard))
	if err != nil {
		logger.Error(err, "Listing the shard Leases")
		return false
	}
	actions, done := decideHandOver(r.Base, all, r.seen.snapshot(), next, r.now(), r.mutation)
	for _, a := range actions {
		switch a.kind {
		case createShardLease:
			if c.createShardLease(ctx, a.shard, next) == nil {
				logger.Info("Created a missing shard Lease; it is free once it expires", "shard", a.shard, "epoch", next.Label(a.shard))
			}
		case relabelShardLease:
			updated := a.lease.DeepCopy()
			updated.Labels = withEpoch(updated.Labels, next, a.shard)
			updated.Spec.HolderIdentity = nil
			if _, err := leases.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				logger.Info("Relabelling a shard Lease failed; retrying", "shard", a.shard, "err", err)
			}
		}
	}
	return done
}

// coordinatorActionKind is what a coordinator's action does.
type coordinatorActionKind int

const (
	// createShardLease creates a missing shard Lease with the next epoch, held by the
	// coordinator for a lease duration (see coordinator.createShardLease).
	createShardLease coordinatorActionKind = iota
	// relabelShardLease gives a released or expired shard Lease the next epoch,
	// conditional on the resourceVersion seen, and releases it.
	relabelShardLease
)

type coordinatorAction struct {
	kind  coordinatorActionKind
	shard int
	lease *coordinationv1.Lease
}

// decideHandOver decides one step of the handover to next: every shard Lease of next's
// plan that is missing is created, and every one that does not carry next's label for
// it (its range moved) is relabelled once its holder released it or it expired (seen
// unchanged, at its resourceVersion, for its duration); Leases beyond next's count are
// relabelled too, so that nobody works on them. A shard whose range stays already
// carries its label and is left alone, held. done reports that every Lease carries
// next's label and none is still held by the coordinator after it created it.
func decideHandOver(base string, shardLeases []*coordinationv1.Lease, seen map[string]observation, next Epoch, now time.Time, m mutation) (actions []coordinatorAction, done bool) {
	byShard := map[int]*coordinationv1.Lease{}
	for _, l := range shardLeases {
		if shard, ok := ShardOf(base, l.Name); ok {
			byShard[shard] = l
		}
	}
	// Up to the highest shard Lease there is: a gap (a deleted Lease) must not hide
	// the Leases above it.
	highest := next.Plan.Shards()
	for shard := range byShard {
		highest = max(highest, shard+1)
	}
	done = true
	for shard := range highest {
		l, ok := byShard[shard]
		switch {
		case !ok && shard < next.Plan.Shards():
			actions = append(actions, coordinatorAction{kind: createShardLease, shard: shard})
			done = false
		case ok && l.Labels[LabelEpoch] == next.Label(shard) && holder(l) == recreatedHolder && !expiredAt(l, seen, now) && m != mutationNoWaitForRecreatedHold:
			// Created for a missing Lease: the deleted one's holder may still work on
			// the old range, which overlaps the new ranges of its neighbours.
			done = false
		case !ok || l.Labels[LabelEpoch] == next.Label(shard):
		case !expiredAt(l, seen, now) && m != mutationRelabelHeld:
			done = false // its holder is still draining
		default:
			actions = append(actions, coordinatorAction{kind: relabelShardLease, shard: shard, lease: l})
			done = false // the informer shows the relabelled Lease on a later pass
		}
	}
	return actions, done
}

func withEpoch(labels map[string]string, e Epoch, shard int) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	out[LabelEpoch] = e.Label(shard)
	return out
}

// labelsOf selects base's Leases in role.
func labelsOf(base, role string) labels.Selector {
	return labels.SelectorFromSet(Labels(base, role))
}
