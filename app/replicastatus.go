package app

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// The lines of /statusz/replica are built here, not in package serving: they are the
// run mode in words (leader election on or off, warm or cold standby, sharded), which is
// app's to know; serving only serves them (serving.StatuszField).

// electionStatus is what this replica knows of the leader election, for /statusz/replica:
// this candidate's identity, and what it last read or wrote of the Lease (see
// leaderelection.Config.Observe). It decides nothing; the election does.
type electionStatus struct {
	// now is the clock of observations; time.Now if nil.
	now func() time.Time

	mu sync.Mutex
	// identity is this candidate's, once it joined the election.
	identity string
	// seen is when the Lease was last read or written; zero before the first time.
	seen time.Time
	// holder and transitions are the Lease's as last seen; holder "" is a released Lease.
	holder      string
	transitions int
	// acquired is when this replica acquired the Lease, as it wrote it into the Lease;
	// zero unless the Lease last seen names this replica.
	acquired time.Time
}

// joined records this candidate's identity when it joins the election.
func (e *electionStatus) joined(identity string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.identity = identity
}

// observe records a record of the Lease this candidate read or wrote.
func (e *electionStatus) observe(record resourcelock.LeaderElectionRecord) {
	now := time.Now
	if e.now != nil {
		now = e.now
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen, e.holder, e.transitions = now(), record.HolderIdentity, record.LeaderTransitions
	e.acquired = time.Time{}
	if record.HolderIdentity == e.identity {
		e.acquired = record.AcquireTime.Time
	}
}

// electionSnapshot is a copy of electionStatus's observations.
type electionSnapshot struct {
	identity, holder string
	seen, acquired   time.Time
	transitions      int
}

func (e *electionStatus) snapshot() electionSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return electionSnapshot{identity: e.identity, holder: e.holder, seen: e.seen, acquired: e.acquired, transitions: e.transitions}
}

// replicaStatus is what /statusz/replica says about this replica, beyond the library's
// version, start time and paths at /statusz.
type replicaStatus struct {
	ready *serving.Readiness
	mode  *replicaMode
	// election is nil without leader election, and in sharded mode, where Shards says
	// what this replica holds.
	election *electionStatus
	// enabled and disabled are canonical controller names, sorted.
	enabled, disabled []string
	// shards, in sharded mode (--shards above 1), says which shards this replica
	// holds; nil otherwise.
	shards func() string
	// connections holds the connection tracker of the informers started last; nil
	// reports nothing.
	connections *atomic.Pointer[reconnect.Informers]
	// now is the clock of "ago"s; time.Now if nil.
	now func() time.Time
}

// fields lists the lines of /statusz/replica, in order.
func (s *replicaStatus) fields() []serving.StatuszField {
	return []serving.StatuszField{
		{Name: "Leader election", Value: s.leaderElection},
		{Name: "Controllers", Value: s.controllers},
		{Name: "Caches", Value: s.caches},
		{Name: "Informers", Value: s.informers},
		{Name: "Write fence", Value: s.mode.fenceText},
		{Name: "Shards", Value: func() string {
			if s.shards == nil {
				return "not sharded (--shards=1): one leader works on every namespace"
			}
			return s.shards()
		}},
	}
}

func (s *replicaStatus) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// leaderElection says this replica's role and what it last saw of the Lease, e.g.
// "standby (warm) | Lease kube-system/mini-kcm | identity a_1 | holder b_2 (seen 1s ago) | transitions 3".
func (s *replicaStatus) leaderElection() string {
	st := s.ready.State()
	parts := []string{s.mode.role(st.Role)}
	if s.mode.singleLeader() {
		parts = append(parts, "Lease "+s.mode.lease())
		if s.election != nil {
			parts = append(parts, s.leaseParts(s.election.snapshot())...)
		}
		parts = append(parts, s.termParts(leaderelection.Stats(s.mode.name))...)
	}
	if st.Stopping {
		parts = append(parts, "shutting down")
	}
	return strings.Join(parts, " | ")
}

// leaseParts describes what the election last saw of the Lease.
func (s *replicaStatus) leaseParts(e electionSnapshot) []string {
	if e.identity == "" {
		return nil
	}
	parts := []string{"identity " + e.identity}
	if e.seen.IsZero() {
		return append(parts, "holder not read yet")
	}
	now := s.clock()
	seen := fmt.Sprintf("seen %s ago", duration.HumanDuration(now.Sub(e.seen)))
	switch e.holder {
	case "":
		parts = append(parts, "holder none, released ("+seen+")")
	case e.identity:
		parts = append(parts, "holder this replica ("+seen+")")
	default:
		parts = append(parts, "holder "+e.holder+" ("+seen+")")
	}
	if !e.acquired.IsZero() {
		parts = append(parts, fmt.Sprintf("acquired %s (%s ago)",
			e.acquired.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(e.acquired))))
	}
	return append(parts, fmt.Sprintf("transitions %d", e.transitions))
}

// termParts says whether the term is paused, and how often terms of this process
// paused, resumed and lost the Lease, once any did, e.g. "paused 3s ago: writes fenced
// until a renewal succeeds | pauses 2, resumes 1, lost 0".
func (s *replicaStatus) termParts(st leaderelection.LeaseStats) []string {
	if st == (leaderelection.LeaseStats{}) {
		return nil
	}
	var parts []string
	if !st.PausedSince.IsZero() {
		parts = append(parts, fmt.Sprintf("paused %s ago: writes fenced until a renewal succeeds",
			duration.HumanDuration(s.clock().Sub(st.PausedSince))))
	}
	return append(parts, fmt.Sprintf("pauses %d, resumes %d, lost %d", st.Pauses, st.Resumes, st.Losses))
}

// controllers names the enabled and the disabled controllers.
func (s *replicaStatus) controllers() string {
	return fmt.Sprintf("%s (disabled: %s)", namesOrNone(s.enabled), namesOrNone(s.disabled))
}

func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// caches says, for a leader, which controllers' caches synced and which informers the
// others wait for; for a warm standby (or a replica without election that has not
// started its workers yet), whether the shared informers synced.
func (s *replicaStatus) caches() string {
	st := s.ready.State()
	switch {
	case st.Role == serving.RoleLeading && st.Caches != nil:
		return controllerCaches(st.Caches.Pending())
	case st.Role == serving.RoleLeading:
		return "building the controllers"
	case st.Informers != nil:
		prefix := ""
		if st.Role == serving.RoleStandby {
			prefix = "warm standby: "
		}
		if unsynced := st.Informers(); len(unsynced) > 0 {
			return prefix + "waiting for shared informers " + strings.Join(unsynced, ", ")
		}
		return prefix + "shared informers synced"
	case st.Role == serving.RoleStandby && s.mode.run == coldStandby:
		return "cold standby: none (the informers start on acquiring the Lease)"
	default:
		return "not started yet"
	}
}

// informers says, per resource, whether the informers started last are connected
// and when each last received anything, e.g. "mini-kcm: pods connected 5m ago
// (received 2s ago), replicasets disconnected 12s ago (received 40s ago; last error:
// ... connection refused)".
func (s *replicaStatus) informers() string {
	var tracker *reconnect.Informers
	if s.connections != nil {
		tracker = s.connections.Load()
	}
	if tracker == nil {
		return "none running"
	}
	now := s.clock()
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return duration.HumanDuration(now.Sub(t)) + " ago"
	}
	var parts []string
	for _, c := range tracker.Status() {
		state := "disconnected"
		if c.Connected {
			state = "connected"
		}
		part := fmt.Sprintf("%s %s %s (received %s", c.Resource, state, ago(c.Since), ago(c.Received))
		if !c.Connected && c.LastError != "" {
			part += "; last error: " + c.LastError
		}
		parts = append(parts, part+")")
	}
	if len(parts) == 0 {
		return tracker.Name() + ": not connected yet"
	}
	return tracker.Name() + ": " + strings.Join(parts, ", ")
}

// controllerCaches formats a CacheSyncTracker's Pending, e.g.
// "synced: deployment-controller | waiting for: replicaset-controller (pods, replicasets)".
func controllerCaches(pending map[string][]string) string {
	var synced, waiting []string
	for controller, informers := range pending {
		switch {
		case len(informers) == 0:
			synced = append(synced, controller)
		case len(informers) == 1 && informers[0] == controllers.NotStarted:
			waiting = append(waiting, controller+" "+controllers.NotStarted)
		default:
			waiting = append(waiting, controller+" ("+strings.Join(informers, ", ")+")")
		}
	}
	sort.Strings(synced)
	sort.Strings(waiting)
	line := "synced: " + namesOrNone(synced)
	if len(waiting) > 0 {
		line += " | waiting for: " + strings.Join(waiting, ", ")
	}
	return line
}
