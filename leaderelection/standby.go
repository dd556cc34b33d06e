package leaderelection

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
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
// periods and so takes over up to 2.2 retry periods after the Lease expired.
//
// It keeps client-go's rules, but for which time counts. A record is a Lease's holder,
// times, duration and transitions; the standby notes on its own clock when it first
// saw each record, from the watch on the Lease or from its own reads, and the Lease is
// free once the holder is empty or the record has not changed for its
// leaseDurationSeconds while this standby was in contact with the apiserver.
// Timestamps written by other replicas are never compared with ours.
//
// Only time in contact counts. The standby reads the Lease every retry period, with or
// without the watch (a quiet watch says nothing of whether the apiserver answers), and
// counts the time between two successful reads only when they are at most a retry
// period plus a request timeout apart, as they are while the apiserver answers. A
// stall of the apiserver that every replica shares stops the count, so the leader,
// which could not renew either, keeps the Lease; it resumes once its renewals go
// through again (see term). Counting less than the time elapsed can only delay a
// takeover, never hasten it, so the safety rule (the leader's fence closes before any
// standby may act) does not depend on it.
//
// Taking the Lease reads it and then writes it with the resourceVersion read (the lock
// is an optimistic update): a record the watch had not delivered yet shows up in that
// read and restarts the wait from now; a write racing ours fails with a conflict, and
// the standby reads again. A Lease that still names this candidate (its own earlier
// term) is taken back at once, with a write all the same: only a write that succeeded
// opens the fence.
type standby struct {
	lock     resourcelock.Interface
	identity string
	// leaseDuration is what this candidate writes into the Lease.
	leaseDuration time.Duration
	// retryPeriod spaces out the reads, and the attempts after errors.
	retryPeriod time.Duration
	// maxGap is the longest time between two successful reads that is counted as
	// time in contact: a retry period plus a request timeout.
	maxGap time.Duration
	clock  clock.Clock
	// watch, when set, is watched for changes of the Lease namespace/name.
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
	// unchanged is how long, in contact, raw has been seen unchanged: up to contactAt.
	unchanged time.Duration
	// contactAt is when the standby last learnt the Lease's state: when raw was first
	// seen, or the answer of its latest successful read since.
	contactAt time.Time
	// lastRead is when the standby last sent a read of the Lease.
	lastRead time.Time
	// changed is signalled when the watch delivered a new record.
	changed chan struct{}
	// mutation is Config.mutation, for the simulation test.
	mutation mutation
}

func newStandby(cfg Config, lock resourcelock.Interface, clk clock.Clock) *standby {
	return &standby{
		lock:          lock,
		identity:      cfg.Identity,
		leaseDuration: cfg.LeaseDuration,
		retryPeriod:   cfg.RetryPeriod,
		maxGap:        cfg.RetryPeriod + cfg.RequestTimeout(),
		clock:         clk,
		watch:         cfg.LeaseWatch,
		namespace:     cfg.Namespace,
		name:          cfg.Name,
		observe:       cfg.Observe,
		changed:       make(chan struct{}, 1),
		mutation:      cfg.mutation,
	}
}

// acquire returns once this candidate holds the Lease, with the record it wrote and
// when that write was sent, or with ok false when ctx ended first.
func (s *standby) acquire(ctx context.Context) (written resourcelock.LeaderElectionRecord, sent time.Time, ok bool) {
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
			return written, sent, false
		}
		wait, read := s.next()
		if read {
			s.read(ctx)
			continue
		}
		if wait <= 0 {
			var retryAfter time.Duration
			written, sent, ok, retryAfter = s.try(ctx)
			if ok {
				return written, sent, true
			}
			wait = retryAfter
		}
		if wait <= 0 {
			continue
		}
		timer := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			logger.V(4).Info("Stopped standing by")
			return written, sent, false
		case <-s.changed:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// next returns how long to wait before the Lease may be free, 0 or less if it may be
// free now (or nothing is known of it), and whether the standby should read the Lease
// first because a retry period passed since its last read.
func (s *standby) next() (wait time.Duration, read bool) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.raw == nil || s.record.HolderIdentity == "" || s.record.HolderIdentity == s.identity {
		return 0, false
	}
	remaining := time.Duration(s.record.LeaseDurationSeconds)*time.Second - s.unchanged
	if remaining <= 0 || s.mutation == mutationTakeAtObservation {
		return 0, false
	}
	untilRead := s.lastRead.Add(s.retryPeriod).Sub(now)
	// The attempt reads the Lease first: if it is answered in time, it completes the
	// count at the moment the Lease expires, without waiting for the next read.
	if remaining <= s.maxGap {
		if untilFree := s.contactAt.Add(remaining).Sub(now); untilFree <= untilRead {
			return untilFree, false
		}
	}
	return untilRead, untilRead <= 0
}

// see records record (raw, its encoding), learnt at at, as the Lease's current record.
// A new record restarts the count; the same record again, from a read (contact),
// counts the time since the last contact if the apiserver answered in between (see
// standby). It reports whether the record was new.
func (s *standby) see(record resourcelock.LeaderElectionRecord, raw []byte, at time.Time, contact bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.raw == nil || !bytes.Equal(s.raw, raw) {
		s.raw, s.record, s.seenAt, s.unchanged, s.contactAt = raw, record, at, 0, at
		return true
	}
	if contact && at.After(s.contactAt) {
		if gap := at.Sub(s.contactAt); gap <= s.maxGap {
			s.unchanged += gap
		}
		s.contactAt = at
	}
	return false
}

// forget drops what the standby knew of the Lease (it was deleted): the next attempt
// reads it, or creates it.
func (s *standby) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = nil
}

// get reads the Lease, records what it shows and returns it.
func (s *standby) get(ctx context.Context) (*resourcelock.LeaderElectionRecord, error) {
	s.mu.Lock()
	s.lastRead = s.clock.Now()
	s.mu.Unlock()
	record, raw, err := s.lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		s.forget()
	case err == nil:
		s.seeHolder(ctx, *record, raw, true)
	}
	return record, err
}

// read reads the Lease and records what it shows.
func (s *standby) read(ctx context.Context) {
	if _, err := s.get(ctx); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Error retrieving lease lock", "lock", s.lock.Describe())
	}
}

// seeHolder is see, at the clock's now, that also logs a new holder.
func (s *standby) seeHolder(ctx context.Context, record resourcelock.LeaderElectionRecord, raw []byte, contact bool) bool {
	s.mu.Lock()
	previous, known := s.record.HolderIdentity, s.raw != nil
	s.mu.Unlock()
	changed := s.see(record, raw, s.clock.Now(), contact)
	if changed && (!known || previous != record.HolderIdentity) && record.HolderIdentity != "" && record.HolderIdentity != s.identity {
		klog.FromContext(ctx).Info("New leader observed", "leader", record.HolderIdentity)
	}
	return changed
}

// try reads the Lease and, if it is free by this candidate's clock, writes it with this
// candidate as holder. It returns the record written and when it was sent if that
// succeeded, or else how long to wait before trying again (0: at once, or when the
// Lease expires).
func (s *standby) try(ctx context.Context) (written resourcelock.LeaderElectionRecord, sent time.Time, ok bool, retryAfter time.Duration) {
	logger := klog.FromContext(ctx)
	record, err := s.get(ctx)
	now := s.clock.Now()
	mine := resourcelock.LeaderElectionRecord{
		HolderIdentity:       s.identity,
		LeaseDurationSeconds: int(s.leaseDuration / time.Second),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
	switch {
	case apierrors.IsNotFound(err):
		if err := s.lock.Create(ctx, mine); err != nil {
			logger.Error(err, "Error initially creating lease lock", "lock", s.lock.Describe())
			return written, sent, false, s.retryPeriod
		}
		return mine, now, true, 0
	case err != nil:
		logger.Error(err, "Error retrieving lease lock", "lock", s.lock.Describe())
		return written, sent, false, s.retryPeriod
	}
	var previousHolder string
	var unchangedFor time.Duration
	switch record.HolderIdentity {
	case s.identity:
		// Ours already: an earlier term of this process that nobody took over. The
		// write below proves that, and keeps the acquisition and the transitions.
		mine.AcquireTime, mine.LeaderTransitions = record.AcquireTime, record.LeaderTransitions
	case "":
		mine.LeaderTransitions = record.LeaderTransitions + 1
	default:
		// Not free yet, or a read is due first: a read slower than a retry period
		// leaves the count where it was, and "read now" is not "free now".
		if wait, read := s.next(); wait > 0 || read {
			return written, sent, false, 0
		}
		previousHolder, unchangedFor = record.HolderIdentity, s.unchangedFor()
		mine.LeaderTransitions = record.LeaderTransitions + 1
	}
	if err := s.lock.Update(ctx, mine); err != nil {
		if apierrors.IsConflict(err) {
			// Written by someone else since our read: read again at once.
			logger.V(2).Info("Lease changed while taking it; reading it again", "lock", s.lock.Describe())
			return written, sent, false, 0
		}
		logger.Error(err, "Failed to update lease", "lock", s.lock.Describe())
		if s.mutation == mutationWaitOnFailedAcquisition {
			<-ctx.Done()
		}
		return written, sent, false, s.retryPeriod
	}
	if previousHolder != "" {
		logger.Info("Took over the lease at its expiry", "previousHolder", previousHolder,
			"unchangedInContactFor", unchangedFor.Round(time.Millisecond), "firstSeen", now.Sub(s.seenAtOf()).Round(time.Millisecond))
	}
	return mine, now, true, 0
}

func (s *standby) seenAtOf() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seenAt
}

func (s *standby) unchangedFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unchanged
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
		record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
		raw, err := json.Marshal(*record)
		if err != nil {
			return
		}
		if s.seeHolder(ctx, *record, raw, false) {
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
			s.forget()
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		logger.Error(err, "Watching the lease failed; reading it every retry period only", "lock", s.lock.Describe())
		return
	}
	informer.RunWithContext(ctx)
}
