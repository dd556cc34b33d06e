// Package queueworker is the worker loop every mini-kcm controller uses, written once:
// Run waits for the controller's named caches, starts N workers per queue and returns
// only after they stopped; each worker takes a key, calls the controller's sync function,
// records the sync's duration and result (controllers.RecordSync) and its start in
// controllers.InFlightSyncs (for the stuck-sync health check), and applies the queue's
// retry policy in one place. A controller keeps only its handlers and its sync function.
//
// Queue latency, work duration, depth and retries per controller come from the named
// workqueue (component-base's workqueue metrics provider, registered once by the app).
package queueworker

import (
	"context"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Retry is a queue's policy for a key whose sync failed. Upstream differs per controller,
// so each controller states its own.
type Retry struct {
	// MaxRetries drops a key after it failed this many times in a row, as upstream's
	// maxRetries does; the key comes back at its next event. 0 retries forever.
	MaxRetries int
	// Permanent reports errors that retrying cannot fix: the key is forgotten as after
	// a success. nil: none.
	Permanent func(error) bool
	// Quiet reports expected errors: retried as any other, but logged at V(4) instead
	// of reported through HandleError. nil: none.
	Quiet func(error) bool
}

// Queue is a rate-limited workqueue together with the sync function of its keys. It
// embeds the workqueue, so handlers add keys to it directly.
type Queue[K comparable] struct {
	workqueue.TypedRateLimitingInterface[K]
	// Controller is the controller's canonical name: the sync metrics' label and the
	// name in stuck-sync reports.
	Controller string
	// Sync reconciles one key. An error retries the key according to Retry.
	Sync func(ctx context.Context, key K) error
	// Retry is what happens after Sync fails.
	Retry Retry
	// Unrecorded leaves this queue's syncs out of the sync metrics, for a queue that
	// only fans work out to another (the endpoints controller's pod projections).
	Unrecorded bool

	// parked are the keys whose sync the write fence refused (see Spec.Fence).
	parked parking[K]
}

// parking holds the keys whose writes the fence refused until it reopens. They did not
// fail: this replica may not write now (a paused or resuming term). Backed off as
// failures, a key refused throughout a 30s pause would wait about as long again after
// the pause, and up to the limiter's 1000s after a longer one, unless an event woke it.
type parking[K comparable] struct {
	fence controllers.WriteFence
	mu    sync.Mutex
	keys  sets.Set[K]
	// added is signalled when a key is parked.
	added chan struct{}
}

// park holds key until the fence reopens.
func (p *parking[K]) park(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys.Insert(key)
	select {
	case p.added <- struct{}{}:
	default:
	}
}

// take returns the parked keys and forgets them.
func (p *parking[K]) take() sets.Set[K] {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := p.keys
	p.keys = sets.New[K]()
	return keys
}

// NewQueue returns a queue with the default controller rate limiter (per-key exponential
// backoff from 5ms to 1000s, and an overall 10 qps/100 burst bucket) whose workqueue
// metrics carry name.
func NewQueue[K comparable](name, controller string, sync func(context.Context, K) error, retry Retry) *Queue[K] {
	return &Queue[K]{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[K](),
			workqueue.TypedRateLimitingQueueConfig[K]{Name: name},
		),
		Controller: controller,
		Sync:       sync,
		Retry:      retry,
	}
}

// Loop is a queue that Run can drain with workers; *Queue[K] is one for every K.
type Loop interface {
	processNextWorkItem(ctx context.Context, syncs *controllers.InFlightSyncs) bool
	// parkFencedKeys makes the keys fence refused wait for it to reopen, until ctx ends.
	parkFencedKeys(ctx context.Context, fence controllers.WriteFence, running *sync.WaitGroup)
	ShutDown()
}

func (q *Queue[K]) parkFencedKeys(ctx context.Context, fence controllers.WriteFence, running *sync.WaitGroup) {
	q.parked.fence, q.parked.keys, q.parked.added = fence, sets.New[K](), make(chan struct{}, 1)
	running.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-q.parked.added:
			}
			select {
			case <-ctx.Done():
				return
			case <-fence.WhenOpen():
			}
			for key := range q.parked.take() {
				q.Add(key)
			}
		}
	})
}

// ProcessNextWorkItem syncs one key, waiting for one if the queue is empty; false means
// the queue shut down. Tests call it to sync one key; Run's workers call its unexported
// form, which also records the sync in flight for the stuck-sync check.
func (q *Queue[K]) ProcessNextWorkItem(ctx context.Context) bool {
	return q.processNextWorkItem(ctx, nil)
}

func (q *Queue[K]) processNextWorkItem(ctx context.Context, syncs *controllers.InFlightSyncs) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)

	done := syncs.Started(q.Controller, key)
	start := time.Now()
	err := q.Sync(ctx, key)
	done()
	if !q.Unrecorded {
		controllers.RecordSync(q.Controller, start, err)
	}
	q.handleErr(ctx, key, err)
	return true
}

// handleErr decides, in this one place, whether a key is done (Forget), retried with
// backoff (AddRateLimited) or dropped.
func (q *Queue[K]) handleErr(ctx context.Context, key K, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case err == nil || (q.Retry.Permanent != nil && q.Retry.Permanent(err)):
		q.Forget(key)
	case q.parked.fence != nil && q.parked.fence.Refused(err):
		// Not a failure of the key: it is synced again the moment the fence reopens.
		logger.V(4).Info("Sync fenced; parked until this replica may write again", "controller", q.Controller, "key", key, "err", err)
		q.Forget(key)
		q.parked.park(key)
	case q.Retry.Quiet != nil && q.Retry.Quiet(err):
		logger.V(4).Info("Sync failed as expected; retrying", "controller", q.Controller, "key", key, "err", err)
		q.AddRateLimited(key)
	case q.Retry.MaxRetries == 0:
		// Never given up on: every failure is worth reporting.
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing", "controller", q.Controller, "key", key)
		q.AddRateLimited(key)
	case q.NumRequeues(key) < q.Retry.MaxRetries:
		logger.V(2).Info("Error syncing, will retry", "controller", q.Controller, "key", key, "err", err)
		q.AddRateLimited(key)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Dropping key out of the queue after repeated failures",
			"controller", q.Controller, "key", key, "retries", q.Retry.MaxRetries)
		q.Forget(key)
	}
}

// Spec is what Run needs from a controller.
type Spec struct {
	// Controller is the canonical controller name.
	Controller string
	// Workers is the number of workers started per queue.
	Workers int
	// Caches waits for Informers and reports the unsynced ones by name; nil still waits.
	Caches *controllers.CacheSyncTracker
	// Informers are the caches every worker needs synced before it starts.
	Informers []controllers.InformerSync
	// Syncs records the syncs in progress for the stuck-sync check; nil records nothing.
	Syncs *controllers.InFlightSyncs
	// Queues are drained by Workers workers each, and shut down when Run returns.
	Queues []Loop
	// Fence is the term's write fence (controllers.Context.Fence): a key whose sync it
	// refused waits until it reopens, instead of backing off. Nil: none.
	Fence controllers.WriteFence
	// AfterSync runs once in its own goroutine when the caches synced (e.g. queueing
	// leftovers); it must return when ctx is done.
	AfterSync func(ctx context.Context)
	// LoopPeriod is how long a worker that returned (a panic) waits before it restarts;
	// 0 means one second.
	LoopPeriod time.Duration
}

// Run waits for the caches, runs the workers and blocks until ctx is cancelled. It
// returns only after every worker has finished its current key, so the app can release
// the lease knowing no write is in flight.
func Run(ctx context.Context, s Spec) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", s.Controller, "workers", s.Workers)

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down controller", "controller", s.Controller)
		for _, q := range s.Queues {
			q.ShutDown()
		}
		wg.Wait()
		logger.Info("Controller stopped", "controller", s.Controller)
	}()

	if !s.Caches.WaitForCacheSync(ctx, s.Controller, s.Informers...) {
		return
	}
	period := s.LoopPeriod
	if period <= 0 {
		period = time.Second
	}
	if s.Fence != nil {
		for _, q := range s.Queues {
			q.parkFencedKeys(ctx, s.Fence, &wg)
		}
	}
	for _, q := range s.Queues {
		for range s.Workers {
			wg.Go(func() {
				wait.UntilWithContext(ctx, func(ctx context.Context) {
					for q.processNextWorkItem(ctx, s.Syncs) {
					}
				}, period)
			})
		}
	}
	if s.AfterSync != nil {
		wg.Go(func() { s.AfterSync(ctx) })
	}
	<-ctx.Done()
}
