package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// InformerSync names one informer's HasSynced, so that a sync that never finishes (RBAC
// denies the list, a CRD is missing) can be reported by name instead of as a silent hang.
type InformerSync struct {
	Name   string // e.g. "pods", "replicasets"
	Synced cache.InformerSynced
}

// CacheSyncTracker waits for informers on behalf of controllers and remembers, per
// controller, which informers have not synced yet. The zero value is ready to use; a nil
// tracker still waits but records nothing, which keeps unit tests simple.
type CacheSyncTracker struct {
	mu sync.Mutex
	// pending maps a controller name to the informers it still waits for.
	pending map[string][]string
	// ReportInterval is how often a waiting controller logs what it waits for
	// (default 10s).
	ReportInterval time.Duration
}

// WaitForCacheSync blocks until every informer has synced (true) or ctx is done (false).
// While it waits it logs, every ReportInterval, the names of the informers still
// syncing, and Check reports them.
func (t *CacheSyncTracker) WaitForCacheSync(ctx context.Context, controller string, syncs ...InformerSync) bool {
	logger := klog.FromContext(ctx)
	logger.Info("Waiting for caches to sync", "controller", controller)
	interval := 10 * time.Second
	if t != nil && t.ReportInterval > 0 {
		interval = t.ReportInterval
	}
	lastReport := time.Now()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		var unsynced []string
		for _, s := range syncs {
			if !s.Synced() {
				unsynced = append(unsynced, s.Name)
			}
		}
		t.setPending(controller, unsynced)
		if len(unsynced) > 0 && time.Since(lastReport) >= interval {
			lastReport = time.Now()
			logger.Info("Still waiting for informers to sync; check RBAC and apiserver reachability",
				"controller", controller, "informers", unsynced)
		}
		return len(unsynced) == 0, nil
	})
	if err != nil {
		logger.Error(nil, "Caches did not sync before shutdown", "controller", controller)
		return false
	}
	logger.Info("Caches are synced", "controller", controller)
	return true
}

func (t *CacheSyncTracker) setPending(controller string, unsynced []string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		t.pending = map[string][]string{}
	}
	t.pending[controller] = unsynced
}

// NotStarted stands for the informers of a controller whose Run has not polled them
// yet (see Expect).
const NotStarted = "(not started)"

// Expect marks a controller as waiting before its Run starts, so /readyz is false from
// the moment the controller is built rather than from its first poll.
func (t *CacheSyncTracker) Expect(controller string) {
	t.setPending(controller, []string{NotStarted})
}

// Check returns an error naming every controller whose informers have not synced.
func (t *CacheSyncTracker) Check() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var problems []string
	for controller, unsynced := range t.pending {
		if len(unsynced) > 0 {
			problems = append(problems, fmt.Sprintf("%s waits for informers %s", controller, strings.Join(unsynced, ",")))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return fmt.Errorf("caches not synced: %s", strings.Join(problems, "; "))
}

// Pending returns, for every controller tracked so far, the informers it still waits
// for: an empty list once its caches synced. It is a copy, for status pages.
func (t *CacheSyncTracker) Pending() map[string][]string {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := make(map[string][]string, len(t.pending))
	for controller, unsynced := range t.pending {
		pending[controller] = append([]string(nil), unsynced...)
	}
	return pending
}
