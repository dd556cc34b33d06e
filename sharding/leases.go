package sharding

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// The replicas agree on the shards through Leases in the election's namespace, all
// labelled with LabelSet (the base name, --leader-elect-resource-name) and a role:
//
//   - <base>: the coordinator's election. Its holder weighs the namespaces and writes
//     the plan; it never works on objects.
//   - <base>-plan: holds nobody; its annotations carry the active plan and, during a
//     handover, the next one.
//   - <base>-<i>: shard i, held by the replica that works on it. Its LabelEpoch names
//     the epoch that gave the shard the range it may be held for (Epoch.Label).
//   - <base>-member-<hash of identity>: one per live replica, renewed like a Lease, so
//     that every replica knows how many share the shards.
const (
	LabelSet   = "mini-kcm.io/lease-set"
	LabelRole  = "mini-kcm.io/lease-role"
	LabelEpoch = "mini-kcm.io/shard-epoch"

	RoleShard  = "shard"
	RoleMember = "member"
	RolePlan   = "plan"

	// AnnotationPlan holds the active Epoch; AnnotationNext the one being handed over to.
	AnnotationPlan = "mini-kcm.io/shard-plan"
	AnnotationNext = "mini-kcm.io/shard-plan-next"
)

// ShardLeaseName returns the name of shard i's Lease.
func ShardLeaseName(base string, i int) string { return base + "-" + strconv.Itoa(i) }

// PlanLeaseName returns the name of the Lease that carries the plan.
func PlanLeaseName(base string) string { return base + "-plan" }

// MemberLeaseName returns the name of a replica's membership Lease. Identities
// (hostname_uuid) are not valid object names; their hash is.
func MemberLeaseName(base, identity string) string {
	h := fnv.New64a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%s-member-%016x", base, h.Sum64())
}

// ShardOf returns the shard number of a shard Lease's name, and false for other names.
func ShardOf(base, leaseName string) (int, bool) {
	rest, ok := strings.CutPrefix(leaseName, base+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == rest
}

// Epoch is a plan with its number. Epochs only grow, and never repeat. A shard keeps
// its range from one epoch to the next unless the new cuts move one of its bounds:
// Since records, per shard, the epoch that gave the shard its range, and the shard's
// Lease carries that number (Label) for as long as the range holds. A recut therefore
// hands over only the shards whose range changed; the others keep their holder, their
// Lease and their running workers. A shard Lease labelled k may only be held to work
// on shard's range in epoch k, which names one range for good because epochs never
// repeat.
type Epoch struct {
	Number int64
	Plan   Plan
	// Since holds, per shard, the number of the epoch whose cuts gave the shard its
	// range (at most Number). Nil means every range is new in this epoch.
	Since []int64
}

// Label returns the value of LabelEpoch that shard's Lease carries while it may be
// held under this epoch: the epoch since which the shard has its range, and the range
// itself, as "<since>.<first hash>-<last hash>" in hex (3.4000000000000000-7fffffffffffffff).
// The range is part of the label because an epoch number alone can be forged: delete
// the plan Lease and the shard Leases carrying the highest epoch, or edit the plan by
// hand, and a number comes back with other cuts. Two elections, a Lease and an
// election, or a Lease and a plan that agree on a label therefore agree on the range.
// A shard beyond the plan's count gets the bare Number, which no election of any range
// works under.
func (e Epoch) Label(shard int) string {
	if shard >= e.Plan.Shards() {
		return strconv.FormatInt(e.Number, 10)
	}
	first, last := e.Plan.hashes(shard)
	return fmt.Sprintf("%d.%016x-%016x", e.since(shard), first, last)
}

// EpochOfLabel returns the epoch number a LabelEpoch value starts with.
func EpochOfLabel(label string) (int64, bool) {
	number, _, _ := strings.Cut(label, ".")
	n, err := strconv.ParseInt(number, 10, 64)
	return n, err == nil
}

func (e Epoch) since(shard int) int64 {
	if shard < len(e.Since) && shard < e.Plan.Shards() {
		return e.Since[shard]
	}
	return e.Number
}

// Next returns the epoch number with plan p that follows e: the shards whose bounds
// p keeps keep their Since, the others get number.
func (e Epoch) Next(number int64, p Plan) Epoch {
	next := Epoch{Number: number, Plan: p, Since: make([]int64, p.Shards())}
	for shard := range next.Since {
		next.Since[shard] = number
		if shard < e.Plan.Shards() && sameBounds(e.Plan, p, shard) {
			next.Since[shard] = e.since(shard)
		}
	}
	return next
}

// Moved returns the shards of e whose range next changes, in order: those whose
// elections a handover from e to next stops.
func (e Epoch) Moved(next Epoch) []int {
	var moved []int
	for shard := range e.Plan.Shards() {
		if e.Label(shard) != next.Label(shard) || shard >= next.Plan.Shards() {
			moved = append(moved, shard)
		}
	}
	return moved
}

func sameBounds(a, b Plan, shard int) bool {
	as, ae := a.Bounds(shard)
	bs, be := b.Bounds(shard)
	return as == bs && ae == be
}

// String returns "<number>/<plan>", with "/<since of each shard>" when a shard kept its
// range from an earlier epoch: the form ParseEpoch reads.
func (e Epoch) String() string {
	s := strconv.FormatInt(e.Number, 10) + "/" + e.Plan.String()
	kept := false
	parts := make([]string, e.Plan.Shards())
	for shard := range parts {
		parts[shard] = strconv.FormatInt(e.since(shard), 10)
		kept = kept || e.since(shard) != e.Number
	}
	if kept {
		s += "/" + strings.Join(parts, ",")
	}
	return s
}

// ParseEpoch reads what Epoch.String wrote.
func ParseEpoch(s string) (Epoch, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return Epoch{}, fmt.Errorf("shard plan %q: want <epoch>/<cuts> or <epoch>/<cuts>/<since per shard>", s)
	}
	n, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || n < 1 {
		return Epoch{}, fmt.Errorf("shard plan %q: the epoch %q is not a positive number", s, parts[0])
	}
	p, err := Parse(parts[1])
	if err != nil {
		return Epoch{}, err
	}
	e := Epoch{Number: n, Plan: p}
	if len(parts) == 3 {
		for _, part := range strings.Split(parts[2], ",") {
			since, err := strconv.ParseInt(part, 10, 64)
			if err != nil || since < 1 || since > n {
				return Epoch{}, fmt.Errorf("shard plan %q: %q is not an epoch number from 1 to %d", s, part, n)
			}
			e.Since = append(e.Since, since)
		}
		if len(e.Since) != p.Shards() {
			return Epoch{}, fmt.Errorf("shard plan %q: %d epochs for %d shards", s, len(e.Since), p.Shards())
		}
	}
	return e, nil
}

// PlanOf reads the active and the next epoch from the plan Lease; either is nil when
// the Lease does not carry it.
func PlanOf(lease *coordinationv1.Lease) (active, next *Epoch, err error) {
	read := func(key string) (*Epoch, error) {
		s, ok := lease.Annotations[key]
		if !ok {
			return nil, nil
		}
		e, err := ParseEpoch(s)
		if err != nil {
			return nil, fmt.Errorf("annotation %s of Lease %s/%s: %w", key, lease.Namespace, lease.Name, err)
		}
		return &e, nil
	}
	if active, err = read(AnnotationPlan); err != nil {
		return nil, nil, err
	}
	next, err = read(AnnotationNext)
	return active, next, err
}

// Labels returns the labels of one of base's Leases in role.
func Labels(base, role string) map[string]string {
	return map[string]string{LabelSet: base, LabelRole: role}
}

// ErrOtherEpoch is returned by a guarded Lease client for a write to a shard Lease
// that belongs to another epoch than the one its election works for.
var ErrOtherEpoch = errors.New("the shard Lease belongs to another plan epoch")

// GuardEpoch wraps the Lease client of one shard's election so that it only ever writes
// the shard Lease while that Lease carries label (the Epoch.Label of the shard's range
// the election works for): client-go's election reads the Lease and then writes it
// with the resourceVersion it read, so refusing the write when the read showed another
// label makes "this Lease still belongs to my range" and "I hold it" one atomic step.
// A replica that missed a new plan can therefore never take a shard whose range moved,
// and the coordinator's relabelling of a released Lease wins over any holder of the
// old range. It never creates a shard Lease: the coordinator does, with its label.
func GuardEpoch(leases coordinationv1client.LeasesGetter, namespace, label string) coordinationv1client.LeasesGetter {
	return guardedLeases{&epochGuard{LeaseInterface: leases.Leases(namespace), namespace: namespace, epoch: label}}
}

// guardedLeases hands out the guard for the election's namespace, the only one its
// LeaseLock asks for.
type guardedLeases struct{ guard *epochGuard }

func (g guardedLeases) Leases(string) coordinationv1client.LeaseInterface { return g.guard }

type epochGuard struct {
	coordinationv1client.LeaseInterface
	namespace, epoch string

	mu sync.Mutex
	// seen is the epoch label of the Lease as last read, by resourceVersion.
	seen map[string]string
}

func (g *epochGuard) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	lease, err := g.LeaseInterface.Get(ctx, name, opts)
	if err == nil {
		g.mu.Lock()
		g.seen = map[string]string{lease.ResourceVersion: lease.Labels[LabelEpoch]}
		g.mu.Unlock()
	}
	return lease, err
}

func (g *epochGuard) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	g.mu.Lock()
	seen, read := g.seen[lease.ResourceVersion]
	g.mu.Unlock()
	if !read || seen != g.epoch || lease.Labels[LabelEpoch] != g.epoch {
		return nil, fmt.Errorf("not writing Lease %s/%s for plan epoch %s: %w (labelled %q)", g.namespace, lease.Name, g.epoch, ErrOtherEpoch, seen)
	}
	updated, err := g.LeaseInterface.Update(ctx, lease, opts)
	if err == nil {
		g.mu.Lock()
		g.seen = map[string]string{updated.ResourceVersion: updated.Labels[LabelEpoch]}
		g.mu.Unlock()
	}
	return updated, err
}

func (g *epochGuard) Create(_ context.Context, lease *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return nil, fmt.Errorf("not creating Lease %s/%s: shard Leases are created by the coordinator, with their plan epoch", g.namespace, lease.Name)
}
