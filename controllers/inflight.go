package controllers

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// InFlightSyncs remembers the controller, key and start time of every sync in progress,
// so that a worker wedged in one sync (a write that never returns, a deadlock) fails a
// health check that names it instead of silently shrinking the controller's capacity.
// A nil *InFlightSyncs records nothing and always passes, which keeps unit tests simple.
type InFlightSyncs struct {
	// Threshold is how long one sync may run before Check fails; 0 turns the check off
	// (syncs are still recorded, which costs one map write per sync).
	Threshold time.Duration
	// Now is the clock; nil means time.Now. Tests replace it.
	Now func() time.Time

	mu    sync.Mutex
	next  uint64
	syncs map[uint64]inFlightSync
}

type inFlightSync struct {
	controller string
	// key is the queue's key as it is; Check formats it, so that a sync costs no
	// formatting (fmt.Sprint of a pod projection key formats two label maps).
	key     any
	started time.Time
}

// Started records that controller began syncing key; the returned func records that the
// sync ended and must be called exactly once. The key is formatted (fmt.Sprint) only
// when Check reports it.
func (s *InFlightSyncs) Started(controller string, key any) (done func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncs == nil {
		s.syncs = map[uint64]inFlightSync{}
	}
	s.next++
	id := s.next
	s.syncs[id] = inFlightSync{controller: controller, key: key, started: s.now()}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.syncs, id)
	}
}

// Name names the health check.
func (s *InFlightSyncs) Name() string { return "controller-syncs" }

// Check returns an error naming the controller and key of every sync that has run
// longer than Threshold.
func (s *InFlightSyncs) Check() error {
	if s == nil || s.Threshold <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var stuck []string
	for _, sync := range s.syncs {
		if age := now.Sub(sync.started); age > s.Threshold {
			stuck = append(stuck, fmt.Sprintf("%s has synced %q for %s", sync.controller, fmt.Sprint(sync.key), age.Round(time.Second)))
		}
	}
	if len(stuck) == 0 {
		return nil
	}
	sort.Strings(stuck)
	return fmt.Errorf("syncs stuck longer than %s: %s", s.Threshold, strings.Join(stuck, "; "))
}

func (s *InFlightSyncs) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
