package serving

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Role is where this replica stands, as /readyz sees it.
type Role int

const (
	// RoleStarting: serving, but not yet in the election (waiting for the apiserver).
	RoleStarting Role = iota
	// RoleStandby: campaigning for the Lease without holding it.
	RoleStandby
	// RoleLeading: running controllers (also without leader election).
	RoleLeading
)

// Readiness tracks what /readyz reports: ready once this replica is a healthy standby
// or a leader whose controllers' caches synced, and not ready once it shuts down. A warm
// standby (one whose informers run, see --leader-elect-warm-standby) is healthy once
// those informers synced, that is once it could lead at once; a cold standby has nothing
// to sync. Its zero value is a replica that is starting.
type Readiness struct {
	mu       sync.Mutex
	role     Role
	caches   *controllers.CacheSyncTracker
	stopping bool
	// informers lists the shared informers that have not synced; nil until they started.
	informers func() []string
}

// SetStandby marks this replica as campaigning for the Lease.
func (r *Readiness) SetStandby() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role = RoleStandby
}

// SetLeading marks the start of a leadership term; /readyz stays false until
// SetControllersBuilt hands over the term's cache tracker.
func (r *Readiness) SetLeading() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role, r.caches = RoleLeading, nil
}

// SetControllersBuilt hands over the cache tracker of the term's controllers.
func (r *Readiness) SetControllersBuilt(caches *controllers.CacheSyncTracker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.caches = caches
}

// SetInformers hands over the check of the started shared informers: unsynced names
// those that have not synced.
func (r *Readiness) SetInformers(unsynced func() []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.informers = unsynced
}

// SetStopping marks the start of the shutdown: /readyz fails from now on.
func (r *Readiness) SetStopping() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopping = true
}

// ReadinessState is a copy of what Readiness tracks, for /statusz/replica.
type ReadinessState struct {
	Role Role
	// Caches is the leadership term's cache tracker; nil until its controllers are built.
	Caches *controllers.CacheSyncTracker
	// Informers is nil until the shared informers started.
	Informers func() []string
	Stopping  bool
}

// State returns a copy of what r tracks.
func (r *Readiness) State() ReadinessState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReadinessState{Role: r.role, Caches: r.caches, Informers: r.informers, Stopping: r.stopping}
}

// Checks returns the /readyz checks besides ping and the apiserver.
func (r *Readiness) Checks() []healthz.HealthChecker {
	return []healthz.HealthChecker{
		healthz.NamedCheck("controllers", func(*http.Request) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			switch {
			case r.role == RoleStarting:
				return errors.New("waiting for the apiserver before starting")
			case r.role == RoleStandby && r.informers != nil:
				if unsynced := r.informers(); len(unsynced) > 0 {
					return fmt.Errorf("warm standby: informers not synced yet: %s", strings.Join(unsynced, ", "))
				}
				return nil
			case r.role == RoleStandby:
				return nil
			case r.caches == nil:
				return errors.New("leading, building controllers")
			default:
				return r.caches.Check()
			}
		}),
		healthz.NamedCheck("shutdown", func(*http.Request) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.stopping {
				return errors.New("shutting down")
			}
			return nil
		}),
	}
}
