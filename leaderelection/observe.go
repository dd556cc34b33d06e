package leaderelection

import (
	"context"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// observedLock is the elector's lock reporting every record it successfully read or
// wrote (see Config.Observe): while standing by the elector reads the Lease every retry
// period; while leading it writes it at every renewal, often without reading it first.
type observedLock struct {
	resourcelock.Interface
	observe func(resourcelock.LeaderElectionRecord)
}

func (l *observedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	if err == nil && record != nil {
		l.observe(*record)
	}
	return record, raw, err
}

func (l *observedLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.Interface.Create(ctx, record); err != nil {
		return err
	}
	l.observe(record)
	return nil
}

func (l *observedLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.Interface.Update(ctx, record); err != nil {
		return err
	}
	l.observe(record)
	return nil
}
