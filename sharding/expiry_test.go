package sharding

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// One rule says when a Lease expired, and it errs on the side of the holder: a Lease
// whose change the reader does not know of, or whose change lies in the reader's
// future (clock skew), has not expired; a Lease expires only strictly after its
// duration. A reader that reads once counts from renewTime; one that observes counts
// from when it saw the resourceVersion change, whatever renewTime says.
func TestALeaseExpiresOnlyStrictlyAfterItsDurationSinceItsLastKnownChange(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	lease := func(holder *string, seconds *int32, renewed *time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "mini-kcm-1", ResourceVersion: "7"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: seconds}}
		if renewed != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: *renewed}
		}
		return l
	}
	four := ptr.To[int32](4)
	for _, c := range []struct {
		name    string
		lease   *coordinationv1.Lease
		changed *time.Time
		want    bool
	}{
		{"held, changed 3s ago, 4s duration", lease(ptr.To("a"), four, nil), at(3 * time.Second), false},
		{"held, changed exactly 4s ago", lease(ptr.To("a"), four, nil), at(4 * time.Second), false},
		{"held, changed 4.001s ago", lease(ptr.To("a"), four, nil), at(4*time.Second + time.Millisecond), true},
		{"released (empty holder), changed just now", lease(ptr.To(""), four, nil), at(0), true},
		{"released (no holder), change unknown", lease(nil, four, nil), nil, true},
		{"held, change unknown: seen for the first time", lease(ptr.To("a"), four, nil), nil, false},
		{"held, change in the reader's future (clock skew)", lease(ptr.To("a"), four, nil), at(-time.Hour), false},
		{"held, no duration, changed just now", lease(ptr.To("a"), nil, nil), at(0), false},
		{"held, no duration, changed 1ns ago", lease(ptr.To("a"), nil, nil), at(time.Nanosecond), true},
		{"held, negative duration, changed just now", lease(ptr.To("a"), ptr.To[int32](-4), nil), at(0), false},
	} {
		if got := LeaseExpired(c.lease, c.changed, now); got != c.want {
			t.Errorf("%s: LeaseExpired = %v, want %v", c.name, got, c.want)
		}
	}

	// A reader that reads once counts from renewTime, by the holder's clock.
	for _, c := range []struct {
		name  string
		lease *coordinationv1.Lease
		want  bool
	}{
		{"renewed 3s ago", lease(ptr.To("a"), four, at(3*time.Second)), false},
		{"renewed 5s ago", lease(ptr.To("a"), four, at(5*time.Second)), true},
		{"never renewed (no renewTime)", lease(ptr.To("a"), four, nil), false},
		{"renewed an hour ahead of this clock", lease(ptr.To("a"), four, at(-time.Hour)), false},
		{"no duration, renewed 1s ago", lease(ptr.To("a"), nil, at(time.Second)), true},
		{"released, renewed just now", lease(nil, four, at(0)), true},
	} {
		if got := ExpiredByRenewTime(c.lease, now); got != c.want {
			t.Errorf("%s: ExpiredByRenewTime = %v, want %v", c.name, got, c.want)
		}
	}

	// A replica counts from its own observation: a renewTime from long ago does not
	// expire a Lease it saw change 3s ago, and a Lease at another resourceVersion than
	// observed has just changed.
	old := lease(ptr.To("a"), four, at(time.Hour))
	seen := map[string]observation{old.Name: {resourceVersion: "7", at: *at(3 * time.Second)}}
	if expiredAt(old, seen, now) {
		t.Error("expired 3s after it was seen to change, by its renewTime of an hour ago")
	}
	if !expiredAt(old, seen, now.Add(2*time.Second)) {
		t.Error("not expired 5s after it was seen to change")
	}
	seen[old.Name] = observation{resourceVersion: "6", at: *at(time.Hour)}
	if expiredAt(old, seen, now) {
		t.Error("expired although its resourceVersion changed since it was observed")
	}
}
