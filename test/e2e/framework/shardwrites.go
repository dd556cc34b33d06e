package framework

import (
	"fmt"
	"hash/fnv"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// ShardScope is what a sharded test's replicas elect and write: the shard Leases
// <LeaseName>-<i> and the plan Lease of LeaseNamespace, and the tenant Namespaces whose
// writes are judged.
type ShardScope struct {
	LeaseNamespace, LeaseName string
	Namespaces                []string
}

// AssertShardWritesByHolders judges, from the audit log alone, every write of the
// replicas to scope's namespaces that the apiserver accepted (IsReplicaWrite): the shard
// term that made it (its user agent names shard, epoch and term) must be one that held
// that shard's Lease when the apiserver received the write, by the Lease's history in
// the same log (LeaseHistory); the Lease then carried the epoch's label; the namespace
// hashes into the shard's range in that epoch, as the plan Lease wrote it (FNV-1a-64 of
// the name, computed here and not by the product); and all the writes of one term fall
// in one holding of the Lease.
//
// When a holding ends. A replica's holding of a shard Lease begins when the apiserver
// receives the update that makes it the holder (its controllers start writing only once
// that update was answered) and ends when the apiserver receives the next write that
// gives the Lease another holder or none, or another label: a takeover after expiry, a
// release after the term drained, the coordinator's relabelling. The in-process fence
// stops every write before the Lease may expire (more than a second before a standby
// may take it, docs/fencing.md), and a write already received may still be applied
// after the holding ended (the fence's documented limit): so a write counts at its
// receipt, and nothing is allowed after the end. A deleted Lease is the one exception:
// its holder cannot see the deletion before its fence closes, which is why the
// coordinator holds the recreated Lease for a lease duration (docs/sharding.md), so its
// holding ends only when a replica next takes the Lease. With the apiserver's fence
// alone (the in-process one off), a write of the old holder received in the apiserver's
// watch-cache lag after a takeover may be admitted; the test of that mode freezes the
// holder across the takeover, so none is sent then, and this check allows none.
func AssertShardWritesByHolders(t testing.TB, events []controlplane.AuditEvent, scope ShardScope) {
	t.Helper()
	planName := sharding.PlanLeaseName(scope.LeaseName)
	history, err := LeaseHistory(events, scope.LeaseNamespace, func(name string) bool {
		_, shard := sharding.ShardOf(scope.LeaseName, name)
		return shard || name == planName
	})
	if err != nil {
		t.Errorf("rebuilding the shard Leases' history: %v", err)
		return
	}
	epochs := planEpochs(t, history[planName])
	identities := holderUsers(t, scope.LeaseName, history)
	holdings := map[int][]*holding{}
	leaseWrites := 0
	for name, writes := range history {
		if shard, ok := sharding.ShardOf(scope.LeaseName, name); ok {
			holdings[shard] = holdingsOf(shard, writes, identities)
			leaseWrites += len(writes)
		}
	}

	want := map[string]bool{}
	for _, ns := range scope.Namespaces {
		want[ns] = true
	}
	termHolding := map[string]*holding{}
	judged := 0
	// closest is the least time from a write to the end of its holding, of the
	// holdings that ended: how near the log came to a write out of its term.
	closest, closestWrite := time.Duration(-1), ""
	for _, e := range events {
		if !IsReplicaWrite(e) || !want[e.ObjectRef.Namespace] {
			continue
		}
		judged++
		ns, at, user := e.ObjectRef.Namespace, e.RequestReceivedTimestamp, e.By
		write := fmt.Sprintf("%s %s by %s at %s (%s)", e.Verb, e.RequestURI, user, at.Format(time.StampMicro), e.UserAgent)
		term, ok := ParseShardTerm(e.UserAgent)
		if !ok {
			t.Errorf("%s: names no shard term", write)
			continue
		}
		h := holdingAt(holdings[term.Shard], user, at)
		if h == nil {
			t.Errorf("%s: %s's Lease was not held by %s then; %s", write, shardName(scope.LeaseName, term.Shard), user,
				describeHoldings(holdings[term.Shard], at))
			continue
		}
		if !h.end.IsZero() && (closest < 0 || h.end.Sub(at) < closest) {
			closest, closestWrite = h.end.Sub(at), fmt.Sprintf("%s, in %s", write, h)
		}
		if first, ok := termHolding[term.key(user)]; !ok {
			termHolding[term.key(user)] = h
		} else if first != h {
			t.Errorf("%s: the term wrote in two holdings of %s's Lease, %s and %s", write, shardName(scope.LeaseName, term.Shard), first, h)
		}
		labelled, labelRange, err := parseEpochLabel(h.label)
		if err != nil || labelled != term.Epoch {
			t.Errorf("%s: the term names epoch %s, but %s's Lease carried label %q (%v)", write, term.Epoch, shardName(scope.LeaseName, term.Shard), h.label, err)
			continue
		}
		first, end, err := rangeOf(epochs[term.Epoch], term.Shard, labelRange)
		if err != nil {
			t.Errorf("%s: shard %d in epoch %s (label %q): %v", write, term.Shard, term.Epoch, h.label, err)
			continue
		}
		if hash := namespaceHash(ns); hash < first || new(big.Int).SetUint64(hash).Cmp(end) >= 0 {
			t.Errorf("%s: namespace %s (hash %#016x) is outside shard %d's range [%#016x, %#x) in epoch %s",
				write, ns, hash, term.Shard, first, end, term.Epoch)
		}
		if holder, ok := impersonatedExtra(e, leaderelection.LeaseHolderExtra); ok && holder != h.holder {
			t.Errorf("%s: it names holder %s, but %s's Lease was held by %s", write, holder, shardName(scope.LeaseName, term.Shard), h.holder)
		}
		if lease, ok := impersonatedExtra(e, leaderelection.ShardLeaseExtra); ok && lease != scope.LeaseNamespace+"/"+shardName(scope.LeaseName, term.Shard) {
			t.Errorf("%s: it names shard Lease %s, not shard %d's", write, lease, term.Shard)
		}
	}
	t.Logf("audit log: %d accepted writes of the replicas to %d namespaces judged against %d writes of the shard Leases and %d plan epochs; "+
		"the closest write to the end of its holding came %s before it: %s", judged, len(scope.Namespaces), leaseWrites, len(epochs), closest, closestWrite)
}

// ShardTerm is what a controller write's user agent says of the shard term it was made
// in: "mini-kcm/v0 (replicaset-controller; shard 3, epoch 2, term 1764763200123)", the
// term named by the Unix milliseconds at its start (app/sharded.go). The product's
// shapes of the user agent and of the Lease label are read here and in parseEpochLabel
// only.
type ShardTerm struct {
	Shard        int
	Epoch, Start string
}

var shardTermInUserAgent = regexp.MustCompile(`; shard (\d+), epoch ([^,]+), term (\d+)\)$`)

// ParseShardTerm reads the shard term a user agent names.
func ParseShardTerm(userAgent string) (ShardTerm, bool) {
	m := shardTermInUserAgent.FindStringSubmatch(userAgent)
	if m == nil {
		return ShardTerm{}, false
	}
	shard, err := strconv.Atoi(m[1])
	return ShardTerm{Shard: shard, Epoch: m[2], Start: m[3]}, err == nil
}

// String is the term as the user agent names it.
func (s ShardTerm) String() string {
	return fmt.Sprintf("shard %d, epoch %s, term %s", s.Shard, s.Epoch, s.Start)
}

func (s ShardTerm) key(user string) string { return user + " " + s.String() }

// parseEpochLabel reads a shard Lease's epoch label (sharding.LabelEpoch): the epoch
// number, and, when the label carries it, the range as "<epoch>.<first>-<last>" in hex
// (the last hash included).
func parseEpochLabel(label string) (epoch string, rng *[2]*big.Int, err error) {
	epoch, rest, ranged := strings.Cut(label, ".")
	if _, err := strconv.ParseInt(epoch, 10, 64); err != nil {
		return "", nil, fmt.Errorf("label %q names no epoch number", label)
	}
	if !ranged {
		return epoch, nil, nil
	}
	firstHex, lastHex, ok := strings.Cut(rest, "-")
	first, err1 := strconv.ParseUint(firstHex, 16, 64)
	last, err2 := strconv.ParseUint(lastHex, 16, 64)
	if !ok || err1 != nil || err2 != nil {
		return "", nil, fmt.Errorf("label %q: want <epoch>.<first hash>-<last hash>", label)
	}
	end := new(big.Int).Add(new(big.Int).SetUint64(last), big.NewInt(1))
	return epoch, &[2]*big.Int{new(big.Int).SetUint64(first), end}, nil
}

// planEpochs returns the cuts of every epoch the plan Lease carried, active or next,
// by epoch number: more than one when a number came back with other cuts (a deleted
// plan; rangeOf says when that matters).
func planEpochs(t testing.TB, writes []LeaseWrite) map[string][][]uint64 {
	t.Helper()
	epochs := map[string][][]uint64{}
	for _, w := range writes {
		for _, key := range []string{sharding.AnnotationPlan, sharding.AnnotationNext} {
			s, ok := w.Annotations[key]
			if !ok {
				continue
			}
			e, err := sharding.ParseEpoch(s)
			if err != nil {
				t.Errorf("the plan Lease as written at %s: %v", w.Received.Format(time.StampMilli), err)
				continue
			}
			number := strconv.FormatInt(e.Number, 10)
			if !slices.ContainsFunc(epochs[number], func(cuts []uint64) bool { return slices.Equal(cuts, e.Plan.Cuts) }) {
				epochs[number] = append(epochs[number], e.Plan.Cuts)
			}
		}
	}
	return epochs
}

// rangeOf returns shard's range [first, end) in the epoch whose cuts the plan Lease
// carried (cutsOfEpoch: one, or more when its number came back with other cuts), as
// the shard Lease's label names it: a label that carries the range must name one of
// them; a bare epoch number must name one cut, or it cannot tell old ranges from new.
func rangeOf(cutsOfEpoch [][]uint64, shard int, labelled *[2]*big.Int) (first uint64, end *big.Int, err error) {
	var found []string
	for _, cuts := range cutsOfEpoch {
		f, e, ok := shardRange(cuts, shard)
		if !ok {
			continue
		}
		if labelled != nil && (labelled[0].Cmp(new(big.Int).SetUint64(f)) != 0 || labelled[1].Cmp(e) != 0) {
			found = append(found, fmt.Sprintf("[%#016x, %#x)", f, e))
			continue
		}
		if labelled == nil && len(cutsOfEpoch) > 1 {
			return 0, nil, fmt.Errorf("the plan Lease named the epoch with %d cuts, %#x: its label does not say which", len(cutsOfEpoch), cutsOfEpoch)
		}
		return f, e, nil
	}
	if labelled != nil {
		return 0, nil, fmt.Errorf("the label names the range [%#x, %#x), the plan Lease gave the shard %v in that epoch", labelled[0], labelled[1], found)
	}
	return 0, nil, fmt.Errorf("no plan the plan Lease carried has it (epoch cuts %#x)", cutsOfEpoch)
}

// holderUsers returns, per holder identity, the user of the replica whose election
// wrote it into a shard Lease. The elections take and renew a Lease by updates; the
// coordinator creates a missing Lease under a holder name of its own, which no update
// ever writes. An identity written by two users is an error: it would let one replica's
// writes pass for another's.
func holderUsers(t testing.TB, base string, history map[string][]LeaseWrite) map[string]string {
	t.Helper()
	users := map[string]string{}
	for name, writes := range history {
		if _, ok := sharding.ShardOf(base, name); !ok {
			continue
		}
		for _, w := range writes {
			if w.Verb != "update" || w.Holder == "" {
				continue
			}
			if u, ok := users[w.Holder]; ok && u != w.User {
				t.Errorf("holder identity %s was written into the shard Leases by %s and by %s", w.Holder, u, w.User)
			}
			users[w.Holder] = w.User
		}
	}
	return users
}

// holding is one replica's uninterrupted holding of a shard Lease under one label.
type holding struct {
	shard         int
	holder, label string
	user          string
	start, end    time.Time // end is zero while it lasts
	endedBy       string
	deleted       time.Time // when its Lease was deleted under it, if it was
}

func (h *holding) String() string {
	end := "on"
	if !h.end.IsZero() {
		end = h.end.Format(time.StampMicro) + " (" + h.endedBy + ")"
	}
	return fmt.Sprintf("%s's (holder %s, label %s) from %s to %s", h.user, h.holder, h.label, h.start.Format(time.StampMicro), end)
}

// holdingsOf replays a shard Lease's writes into its replicas' holdings (see
// AssertShardWritesByHolders for when one ends).
func holdingsOf(shard int, writes []LeaseWrite, users map[string]string) []*holding {
	var all []*holding
	var cur *holding
	for _, w := range writes {
		if cur != nil {
			switch {
			case w.Deleted:
				if cur.deleted.IsZero() {
					cur.deleted = w.Received
				}
				continue
			case !cur.deleted.IsZero():
				// Deleted under its holder: it lasts until a replica takes the Lease.
				if users[w.Holder] == "" {
					continue
				}
				cur.end, cur.endedBy = w.Received, fmt.Sprintf("deleted at %s, then taken by %s", cur.deleted.Format(time.StampMicro), w.Holder)
			case w.Holder == cur.holder && w.Labels[sharding.LabelEpoch] == cur.label:
				continue // a renewal
			default:
				cur.end, cur.endedBy = w.Received, fmt.Sprintf("%s wrote holder %q, label %q", w.User, w.Holder, w.Labels[sharding.LabelEpoch])
			}
			cur = nil
		}
		if !w.Deleted && users[w.Holder] != "" {
			cur = &holding{shard: shard, holder: w.Holder, label: w.Labels[sharding.LabelEpoch], user: users[w.Holder],
				start: w.Received}
			all = append(all, cur)
		}
	}
	return all
}

// holdingAt returns user's holding that the apiserver's receipt of a write at at falls
// in: after the update that took the Lease was received, and not after the write that
// ended it was.
func holdingAt(holdings []*holding, user string, at time.Time) *holding {
	for _, h := range holdings {
		if h.user == user && h.start.Before(at) && (h.end.IsZero() || !at.After(h.end)) {
			return h
		}
	}
	return nil
}

// describeHoldings says who held the Lease at at, and the holdings just before and after.
func describeHoldings(holdings []*holding, at time.Time) string {
	var parts []string
	for _, h := range holdings {
		if !h.end.IsZero() && h.end.Before(at.Add(-time.Minute)) || h.start.After(at.Add(time.Minute)) {
			continue
		}
		parts = append(parts, h.String())
	}
	if len(parts) == 0 {
		return "no replica held it within a minute of the write"
	}
	return "holdings around the write: " + strings.Join(parts, "; ")
}

// namespaceHash is a namespace's place in the hash space, FNV-1a-64 of its name as
// docs/sharding.md defines it (computed here, not by the product).
func namespaceHash(ns string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(ns))
	return h.Sum64()
}

// shardRange returns shard i's range [first, end) of a plan's cuts: shard i holds the
// hashes from cut i-1 (0 for the first) up to cut i (2^64 for the last).
func shardRange(cuts []uint64, i int) (first uint64, end *big.Int, ok bool) {
	if i < 0 || i > len(cuts) {
		return 0, nil, false
	}
	end = new(big.Int).Lsh(big.NewInt(1), 64)
	if i > 0 {
		first = cuts[i-1]
	}
	if i < len(cuts) {
		end = new(big.Int).SetUint64(cuts[i])
	}
	return first, end, true
}

// impersonatedExtra returns the user extra key of the user a request acted as: with
// --leader-elect-apiserver-fence, a term's writes name their holder and shard Lease.
func impersonatedExtra(e controlplane.AuditEvent, key string) (string, bool) {
	if e.ImpersonatedUser == nil || len(e.ImpersonatedUser.Extra[key]) == 0 {
		return "", false
	}
	return e.ImpersonatedUser.Extra[key][0], true
}

func shardName(base string, shard int) string { return sharding.ShardLeaseName(base, shard) }
