package leaderelection

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// leaderStatus keeps the name and meaning of the gauge client-go's elector reports
	// (through component-base), which dashboards and kube-controller-manager's alerts
	// read; client-go's elector is not used, so it is set here. A paused leader
	// reports 0: it does no leader's work until it resumes.
	leaderStatus = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "leader_election_master_status",
		Help:           "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"name"})
	fenceRefusals = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mini_kcm",
		Subsystem:      "leader_election",
		Name:           "fence_refused_requests_total",
		Help:           "Mutating requests refused by the write fence because this replica did not hold the Lease by its own clock, by client (the controller's name).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})
	leasesLost = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mini_kcm",
		Subsystem:      "leader_election",
		Name:           "leases_lost_total",
		Help:           "Leases this process lost while leading (read in another replica's hands, released or deleted by another writer), by Lease name. The process stays up as a standby.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"name"})
	pauses = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mini_kcm",
		Subsystem:      "leader_election",
		Name:           "pauses_total",
		Help:           "Times the leader paused (no renewal succeeded within the renew deadline, so its writes were fenced while it kept the Lease), by Lease name.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"name"})
	resumes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mini_kcm",
		Subsystem:      "leader_election",
		Name:           "resumes_total",
		Help:           "Times a paused leader resumed because a renewal succeeded, by Lease name.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"name"})
	registerOnce sync.Once
)

// registerMetrics registers the fence's and the election's metrics once per process.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(leaderStatus, fenceRefusals, leasesLost, pauses, resumes)
	})
}

// LeaseStats is what this process's elections of one Lease went through, for
// /statusz: the counters of the metrics above, and whether a term is paused now.
type LeaseStats struct {
	Pauses, Resumes, Losses int
	// PausedSince is when the running term paused; zero unless it is paused.
	PausedSince time.Time
}

var (
	statsMu sync.Mutex
	stats   = map[string]*LeaseStats{}
)

// Stats returns the LeaseStats of the Lease called name (by this process's elections).
func Stats(name string) LeaseStats {
	statsMu.Lock()
	defer statsMu.Unlock()
	if s, ok := stats[name]; ok {
		return *s
	}
	return LeaseStats{}
}

// updateStats changes the LeaseStats of the Lease called name.
func updateStats(name string, change func(*LeaseStats)) {
	statsMu.Lock()
	defer statsMu.Unlock()
	s, ok := stats[name]
	if !ok {
		s = &LeaseStats{}
		stats[name] = s
	}
	change(s)
}
