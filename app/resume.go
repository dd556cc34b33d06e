package app

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/caches/freshness"
)

// termInformers knows which informers the workers of this replica's leadership term run
// on, so that a term resuming after a long pause can show them fresh or have the
// workers go on with fresh ones (see resume).
type termInformers struct {
	mu sync.Mutex
	// built is what the running workers use; nil between two runs of workers.
	built *builtControllers
	// changed is closed when built changes.
	changed chan struct{}
	// restart is closed to ask the running workers to go on with fresh informers.
	restart chan struct{}
}

func newTermInformers() *termInformers {
	return &termInformers{changed: make(chan struct{})}
}

// running records that workers run on built (nil: none now) and returns the channel on
// which they are asked to go on with fresh informers.
func (t *termInformers) running(built *builtControllers) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.built = built
	close(t.changed)
	t.changed = make(chan struct{})
	t.restart = make(chan struct{})
	return t.restart
}

// current returns the informers the workers run on (nil: none now) and a channel
// closed when that changes.
func (t *termInformers) current() (*builtControllers, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.built, t.changed
}

// askRestart asks the workers running on built, if they still do, for fresh informers.
func (t *termInformers) askRestart(built *builtControllers) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.built == built && t.restart != nil {
		close(t.restart)
		t.restart = nil
	}
}

// resumeBarrierAfter is how long a pause must have lasted for a resumed term to show
// its caches fresh before it writes (see resume): well inside the 5 minutes after which
// the ReplicaSet controller's expectations of its own pod creations and deletions
// expire, with room for the writes made while the informers were already cut off
// before the Lease was (up to the 30s the HTTP/2 health check takes to notice).
const resumeBarrierAfter = time.Minute

// resume is a leadership term's Config.Resume. The renewal that resumed the term proved
// that no other replica held the Lease meanwhile, so the only writes its caches may
// miss are its own and other clients'. Other clients' writes reach every controller
// late after an outage. Its own writes are guarded while the pause is short: pod
// creations and deletions by the ReplicaSet controller's expectations (5 minutes) and
// its read-your-writes guard (StaleControllerConsistencyReplicaSet), ReplicaSets,
// Endpoints and EndpointSlices by their deterministic names and by updates that carry
// the cached resourceVersion. A pause shorter than resumeBarrierAfter therefore
// resumes at once.
//
// After a longer one the expectations may have expired while the caches missed the
// writes they stood for, and a worker acting on them would create or delete pods
// again: such a term resumes as a warm takeover starts. It returns once the workers'
// caches are shown as new as a consistent read taken now (the takeover's barrier,
// package freshness), and otherwise once the workers went on with fresh informers,
// which list consistently. Informers that started after the pause began (the term
// restarted them when the apiserver was replaced) are fresh as they are.
func (m *controllerManager) resume(ctx context.Context, pausedFor time.Duration) error {
	if pausedFor < resumeBarrierAfter {
		return nil
	}
	logger := klog.FromContext(ctx)
	pausedAt := time.Now().Add(-pausedFor)
	for {
		built, changed := m.terms.current()
		switch {
		case built == nil:
			// Between two runs of workers: wait for the next.
		case built.started.After(pausedAt):
			logger.Info("Resuming on informers started after the pause began: fresh", "pausedFor", pausedFor.Round(time.Millisecond))
			return nil
		default:
			caches, err := informerCaches(built.factory)
			if err == nil {
				barrier := freshness.Barrier{
					Metadata: m.takeover.reads, Caches: caches, Timeout: m.takeover.timeout,
					CompareAfter: m.takeover.compareAfter, Poll: 5 * time.Millisecond, PageSize: 500,
				}
				var result freshness.Result
				if result, err = barrier.Wait(ctx); err == nil {
					logger.Info("Resuming on the term's caches: every cache is as new as the apiserver after the pause",
						"took", result.Took, "resourceVersion", result.Revision,
						"provenByProgress", result.ByProgress, "provenByContents", result.ByContents)
					return nil
				}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logger.Info("Warning: resuming on fresh informers: the caches could not be shown fresh after the pause", "err", err)
			m.terms.askRestart(built)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
