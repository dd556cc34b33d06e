package leaderelection

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func TestObserveSeesEverySuccessfulReadAndWriteButNoFailedOne(t *testing.T) {
	inner := &fakeLock{identity: "me", current: resourcelock.LeaderElectionRecord{HolderIdentity: "other", LeaderTransitions: 3}}
	var seen []resourcelock.LeaderElectionRecord
	lock := &observedLock{Interface: inner, observe: func(r resourcelock.LeaderElectionRecord) { seen = append(seen, r) }}
	ctx := context.Background()

	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaderTransitions: 4}); err != nil {
		t.Fatal(err)
	}
	inner.onWrite = func(resourcelock.LeaderElectionRecord) error { return errors.New("conflict") }
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaderTransitions: 5}); err == nil {
		t.Fatal("a failing write succeeded")
	}

	if len(seen) != 2 || seen[0].HolderIdentity != "other" || seen[0].LeaderTransitions != 3 ||
		seen[1].HolderIdentity != "me" || seen[1].LeaderTransitions != 4 {
		t.Errorf("observed %+v, want the read (other, 3) and the successful write (me, 4) only", seen)
	}
}
