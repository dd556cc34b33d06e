package leaderelection

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// standby waits, as a candidate that does not hold the Lease, until the Lease is free
// by this candidate's own clock, and takes it at that moment. It replaces the acquire
// loop of client-go's elector, which reads the Lease at a jittered 1 to 2.2 retry
// periods and so takes over up to 2.2 retry periods after the Lease expired; renewals
// stay with the elector, which Run starts once the standby acquired (its first attempt
// finds this candidate holding the Lease and renews it).
//
// It keeps client-go's rules. A record is a Lease's holder, times, duration and
// transitions; the standby notes on its own clock when it first saw each record
// (seenAt), from the watch on the Lease or from its own reads, and the Lease is free
// once the holder is empty or the record has not changed for its leaseDurationSeconds
// since seenAt. Timestamps written by other replicas are never compared with ours.
// Taking the Lease reads it and then writes it with the resourceVersion read (the lock
// is an optimistic update): a record the watch had not delivered yet shows up in that
// read and restarts the wait from now; a write racing ours fails with a conflict, and
// the standby reads again.
type standby struct {
	lock     resourcelock.Interface
	identity string
	// leaseDuration is what this candidate writes into the Lease.
	leaseDuration time.Duration
	// retryPeriod spaces out reads after errors, and the reads themselves without a
	// watch.
	retryPeriod time.Duration
	clock       clock.Clock
	// watch, when set, is watched for changes of the Lease namespace/name; without it
	// the standby reads the Lease every retry period, as client-go does.
	watch           coordinationv1client.LeasesGetter
	namespace, name string
	// observe, when set, is called with every record the watch delivers (the lock
	// reports the reads and writes).
	observe func(resourcelock.LeaderElectionRecord)

	mu sync.Mutex
	// raw is the last record seen, JSON-encoded as resourcelock.LeaseLock.Get encodes
	// it; nil when no record is known (not read yet, or the Lease was deleted).
	raw    []byte
	record resourcelock.LeaderElectionRecord
	// seenAt is when raw was first seen, by clock.
	seenAt time.Time
	// lastRead is when the standby last read the Lease itself.
	lastRead time.Time
	// changed is signalled when the watch delivered a new record.
	changed chan struct{}
	// watching is true while the watch delivers: from its first event until it fails
	// (forbidden, the apiserver away). Until then, and after a failure, the standby
	// reads the Lease every retry period as if it had no watch, so that a watch that
	// cannot run costs promptness, not a lease duration.
	watching atomic.Bool
}

func newStandby(cfg Config, lock resourcelock.Interface, clk clock.Clock) *standby {
	return &standby{
		lock:          lock,
		identity:      cfg.Identity,
		leaseDuration: cfg.LeaseDuration,
		retryPeriod:   cfg.RetryPeriod,
		clock:         clk,
		watch:         cfg.LeaseWatch,
		namespace:     cfg.Namespace,
		name:          cfg.Name,
		observe:       cfg.Observe,
		changed:       make(chan struct{}, 1),
	}
}

// acquire returns true once this candidate holds the Lease, false when ctx ended first.
func (s *standby) acquire(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	if s.watch != nil {
		watchCtx, stopWatch := context.WithCancel(ctx)
		var watching sync.WaitGroup
		watching.Go(func() { s.watchLease(watchCtx) })
		defer watching.Wait()
		defer stopWatch()
	}
	for {
		if ctx.Err() != nil {
			return false
		}
		wait, read := s.next()
		if wait <= 0 {
			acquired, retryAfter := s.try(ctx)
			if acquired {
				return true
			}
			wait = retryAfter
		} else if read {
			s.read(ctx)
			continue
		}
		if wait <= 0 {
			continue
		}
		timer := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			logger.V(4).Info("Stopped standing by")
			return false
		case <-s.changed:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// next returns how long to wait before the Lease may be free, 0 or less if it may be
// free now (or nothing is known of it), and whether the standby should read the Lease
// first because the watch is off and a retry period passed since its last read.
func (s *standby) next() (wait time.Duration, read bool) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.raw == nil || s.record.HolderIdentity == "" || s.record.HolderIdentity == s.identity {
		return 0, false
	}
	wait = s.seenAt.Add(time.Duration(s.record.LeaseDurationSeconds) * time.Second).Sub(now)
	if (s.watch == nil || !s.watching.Load()) && wait > 0 {
		untilRead := s.lastRead.Add(s.retryPeriod).Sub(now)
		if untilRead <= 0 {
			return wait, true
		}
		wait = min(wait, untilRead)
	}
	return wait, false
}

// see records record (raw, its encoding) as the Lease's current record, and when it
// differs from the last one, that it was seen now. It reports whether it differed.
func (s *standby) see(record resourcelock.LeaderElectionRecord, raw []byte) bool {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.raw != nil && bytes.Equal(s.raw, raw) {
		return false
	}
	s.raw, s.record, s.seenAt = raw, record, now
	return true
}

// forget drops what the standby knew of the Lease (it was deleted): the next attempt
// reads it, or creates it.
func (s *standby) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = nil
}

// read reads the Lease and records what it shows.
func (s *standby) read(ctx context.Context) {
	s.mu.Lock()
	s.lastRead = s.clock.Now()
	s.mu.Unlock()
	record, raw, err := s.lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		s.forget()
	case err != nil:
		klog.FromContext(ctx).Error(err, "Error retrieving lease lock", "lock", s.lock.Describe())
	default:
		s.seeHolder(ctx, *record, raw)
	}
}

// seeHolder is see that also logs a new holder.
func (s *standby) seeHolder(ctx context.Context, record resourcelock.LeaderElectionRecord, raw []byte) bool {
	s.mu.Lock()
	previous, known := s.record.HolderIdentity, s.raw != nil
	s.mu.Unlock()
	changed := s.see(record, raw)
	if changed && (!known || previous != record.HolderIdentity) && record.HolderIdentity != "" && record.HolderIdentity != s.identity {
		klog.FromContext(ctx).Info("New leader observed", "leader", record.HolderIdentity)
	}
	return changed
}

// try reads the Lease and, if it is free by this candidate's clock, writes it with this
// candidate as holder. It returns whether this candidate holds the Lease, or else how
// long to wait before trying again (0: at once, or when the Lease expires).
func (s *standby) try(ctx context.Context) (acquired bool, retryAfter time.Duration) {
	logger := klog.FromContext(ctx)
	s.mu.Lock()
	s.lastRead = s.clock.Now()
	s.mu.Unlock()
	now := metav1.NewTime(s.clock.Now())
	mine := resourcelock.LeaderElectionRecord{
		HolderIdentity:       s.identity,
		LeaseDurationSeconds: int(s.leaseDuration / time.Second),
		AcquireTime:          now,
		RenewTime:            now,
	}
	record, raw, err := s.lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		s.forget()
		if err := s.lock.Create(ctx, mine); err != nil {
			logger.Error(err, "Error initially creating lease lock", "lock", s.lock.Describe())
			return false, s.retryPeriod
		}
		return true, 0
	case err != nil:
		logger.Error(err, "Error retrieving lease lock", "lock", s.lock.Describe())
		return false, s.retryPeriod
	}
	if s.seeHolder(ctx, *record, raw) && record.HolderIdentity != "" && record.HolderIdentity != s.identity {
		// The Lease changed since the standby last saw it (its watch is behind, or a
		// renewal raced the timer): it is valid for a whole lease duration from now.
		return false, 0
	}
	if record.HolderIdentity == s.identity {
		// Ours already (a lost renewal that nobody took over): the elector renews it.
		return true, 0
	}
	if wait, _ := s.next(); wait > 0 {
		return false, 0
	}
	mine.LeaderTransitions = record.LeaderTransitions + 1
	unchangedFor := s.clock.Since(s.seenAtOf())
	if err := s.lock.Update(ctx, mine); err != nil {
		if apierrors.IsConflict(err) {
			// Written by someone else since our read: read again at once.
			logger.V(2).Info("Lease changed while taking it over; reading it again", "lock", s.lock.Describe())
			return false, 0
		}
		logger.Error(err, "Failed to update lease", "lock", s.lock.Describe())
		return false, s.retryPeriod
	}
	logger.Info("Took over the lease at its expiry", "previousHolder", record.HolderIdentity,
		"unchangedFor", unchangedFor.Round(time.Millisecond))
	return true, 0
}

func (s *standby) seenAtOf() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seenAt
}

// watchLease runs an informer on the one Lease until ctx ends, recording each record it
// delivers as it arrives.
func (s *standby) watchLease(ctx context.Context) {
	logger := klog.FromContext(ctx)
	byName := fields.OneTermEqualSelector(metav1.ObjectNameField, s.name).String()
	leases := s.watch.Leases(s.namespace)
	// The reflector streams the initial list in a watch (WatchListClient) unless the
	// client says it cannot, as fake clients do.
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = byName
			return leases.List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = byName
			return leases.Watch(ctx, options)
		},
	}, s.watch), &coordinationv1.Lease{}, 0, cache.Indexers{})
	seen := func(obj any) {
		lease, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		s.watching.Store(true)
		record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
		raw, err := json.Marshal(*record)
		if err != nil {
			return
		}
		if s.seeHolder(ctx, *record, raw) {
			if s.observe != nil {
				s.observe(*record)
			}
			select {
			case s.changed <- struct{}{}:
			default:
			}
		}
	}
	if _, err := informer.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(any) {
			s.watching.Store(true)
			s.forget()
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		logger.Error(err, "Watching the lease failed; reading it every retry period", "lock", s.lock.Describe())
		return
	}
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		s.watching.Store(false)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		logger.Error(err, "Watching the lease failed; reading it every retry period", "lock", s.lock.Describe())
		return
	}
	informer.RunWithContext(ctx)
}
