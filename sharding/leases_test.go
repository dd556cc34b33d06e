package sharding

import (
	"errors"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestEpochStringRoundTripsAndBadPlansAreRejected(t *testing.T) {
	e := Epoch{Number: 3, Plan: Balanced(map[string]int64{"a": 1, "b": 1, "c": 1, "d": 1}, 3)}
	got, err := ParseEpoch(e.String())
	if err != nil || got.Number != 3 || got.Plan.String() != e.Plan.String() {
		t.Fatalf("ParseEpoch(%q) = %v, %v", e.String(), got, err)
	}
	for _, bad := range []string{"", "3", "0/", "-1/", "x/0x01", "2/0x02,0x01", "2/12"} {
		if _, err := ParseEpoch(bad); err == nil {
			t.Errorf("ParseEpoch(%q) succeeded, want an error", bad)
		}
	}
}

// A recut that moves one cut keeps the Since of the shards whose bounds stay, and the
// plan Lease carries it.
func TestANextEpochKeepsTheRangesItDoesNotMove(t *testing.T) {
	e2 := Epoch{Number: 2, Plan: Equal(4)}
	moved := Plan{Cuts: []uint64{e2.Plan.Cuts[0], e2.Plan.Cuts[1] + 7, e2.Plan.Cuts[2]}}
	e3 := e2.Next(3, moved)
	var since []int64
	for shard := range 4 {
		n, _ := EpochOfLabel(e3.Label(shard))
		since = append(since, n)
	}
	if want := []int64{2, 3, 3, 2}; !slices.Equal(since, want) {
		t.Errorf("epochs of the labels after moving the cut between shards 1 and 2 = %v, want %v", since, want)
	}
	if e3.Label(0) != e2.Label(0) || e3.Label(3) != e2.Label(3) {
		t.Errorf("the kept shards' labels changed: %s, %s, before %s, %s", e3.Label(0), e3.Label(3), e2.Label(0), e2.Label(3))
	}
	if got, want := e3.Label(1), "3.4000000000000000-8000000000000006"; got != want {
		t.Errorf("shard 1's label = %s, want its epoch and its range, %s", got, want)
	}
	if got := e2.Moved(e3); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("Moved = %v, want [1 2]", got)
	}
	e4 := e3.Next(4, Equal(3))
	if got := e3.Moved(e4); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("Moved to 3 equal shards = %v, want every shard", got)
	}
	if got := e4.Label(5); got != "4" {
		t.Errorf("a shard beyond the plan is labelled %s, want the epoch's number 4", got)
	}
	for _, e := range []Epoch{e2, e3, e4} {
		got, err := ParseEpoch(e.String())
		if err != nil || got.String() != e.String() {
			t.Errorf("ParseEpoch(%q) = %v, %v", e.String(), got, err)
		}
	}
	if s := e3.String(); !strings.HasSuffix(s, "/2,3,3,2") {
		t.Errorf("epoch 3 is written %q, want the since of each shard at the end", s)
	}
	for _, bad := range []string{"3/" + moved.String() + "/2,3,3", "3/" + moved.String() + "/2,4,3,2", "3/" + moved.String() + "/0,3,3,2", "3/" + moved.String() + "/a,3,3,2"} {
		if _, err := ParseEpoch(bad); err == nil {
			t.Errorf("ParseEpoch(%q) succeeded, want an error", bad)
		}
	}
}

func TestLeaseNamesAreValidAndShardOfReadsOnlyShardLeases(t *testing.T) {
	base := "mini-kcm"
	for _, name := range []string{ShardLeaseName(base, 12), PlanLeaseName(base), MemberLeaseName(base, "host.example_6f1c2a7e-0b6d-4c4e-9d1a-1f5e8c9b7a00")} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("%q is not a valid object name: %v", name, errs)
		}
	}
	if i, ok := ShardOf(base, ShardLeaseName(base, 12)); !ok || i != 12 {
		t.Errorf("ShardOf(shard 12's Lease) = %d, %v", i, ok)
	}
	for _, other := range []string{base, PlanLeaseName(base), MemberLeaseName(base, "x"), base + "-01", base + "-+1", "other-1"} {
		if i, ok := ShardOf(base, other); ok {
			t.Errorf("ShardOf(%q) = %d, want not a shard Lease", other, i)
		}
	}
}

func shardLease(epoch string, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "mini-kcm-0", Namespace: "kube-system", Labels: map[string]string{LabelEpoch: epoch}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
	}
}

// The guard is what keeps a replica that missed a new plan from taking a shard whose
// range moved: its election reads the Lease, then writes it with what it read.
func TestGuardedLeasesWriteOnlyALeaseOfTheirEpochAsTheyReadIt(t *testing.T) {
	ctx := t.Context()
	epoch2 := Epoch{Number: 2}
	label2 := epoch2.Label(0)
	client := fake.NewClientset(shardLease(label2, ""))
	leases := GuardEpoch(client.CoordinationV1(), "kube-system", label2).Leases("kube-system")

	if _, err := leases.Update(ctx, shardLease(label2, "me"), metav1.UpdateOptions{}); !errors.Is(err, ErrOtherEpoch) {
		t.Errorf("an update without a read = %v, want ErrOtherEpoch", err)
	}
	read, err := leases.Get(ctx, "mini-kcm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read.Spec.HolderIdentity = ptr.To("me")
	if _, err := leases.Update(ctx, read, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an update of a Lease of its epoch, as read: %v", err)
	}

	// The coordinator relabels the Lease for epoch 3: the epoch-2 election may no
	// longer write it, even after reading it again.
	relabelled := shardLease(Epoch{Number: 3}.Label(0), "")
	if _, err := client.CoordinationV1().Leases("kube-system").Update(ctx, relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	read, err = leases.Get(ctx, "mini-kcm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read.Labels[LabelEpoch] = label2 // what client-go's LeaseLock would do with its labels
	read.Spec.HolderIdentity = ptr.To("me")
	if _, err := leases.Update(ctx, read, metav1.UpdateOptions{}); !errors.Is(err, ErrOtherEpoch) {
		t.Errorf("an update of a Lease read with epoch 3 = %v, want ErrOtherEpoch", err)
	}
	if _, err := leases.Create(ctx, shardLease(label2, "me"), metav1.CreateOptions{}); err == nil {
		t.Error("the guard created a shard Lease; only the coordinator may")
	}
}

func TestPlanOfReadsTheActiveAndTheNextEpoch(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationPlan: Epoch{Number: 1, Plan: Equal(2)}.String(),
		AnnotationNext: Epoch{Number: 2, Plan: Equal(3)}.String(),
	}}}
	active, next, err := PlanOf(lease)
	if err != nil || active.Number != 1 || active.Plan.Shards() != 2 || next.Number != 2 || next.Plan.Shards() != 3 {
		t.Fatalf("PlanOf = %v, %v, %v", active, next, err)
	}
	lease.Annotations[AnnotationNext] = "garbage"
	if _, _, err := PlanOf(lease); err == nil {
		t.Error("PlanOf read an unreadable next plan without an error")
	}
}
