package app

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/caches/freshness"
)

var (
	takeovers = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "mini_kcm",
		Subsystem: "leader_election",
		Name:      "takeover_total",
		Help: "Leadership terms of a warm standby, by how its workers started: path=warm on its warm caches, proven as new as a " +
			"consistent read after acquiring the Lease; path=cold on fresh informers, because that could not be shown in time.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"path"})
	registerTakeoversOnce sync.Once
)

// takeoverBarrier bounds and paces the freshness barrier of a warm standby's term.
type takeoverBarrier struct {
	// reads lists consistently, metadata only, on a connection that is not the
	// informers'.
	reads metadata.Interface
	// timeout bounds the whole wait; past it the term starts cold.
	timeout time.Duration
	// compareAfter is how long a cache may catch up before it is compared with a LIST.
	compareAfter time.Duration
}

// newTakeoverBarrier paces the barrier: a busy cache proves itself by its progress
// within milliseconds; a quiet one, which moves only on bookmarks, is compared with a
// LIST after 100ms (at most half a retry period), so that a quiet cluster's takeover
// costs about one LIST per type; after three retry periods the term gives up on the
// warm caches, which then costs about a cold start.
func newTakeoverBarrier(reads metadata.Interface, retryPeriod time.Duration) *takeoverBarrier {
	registerTakeoversOnce.Do(func() { legacyregistry.MustRegister(takeovers) })
	return &takeoverBarrier{reads: reads, timeout: 3 * retryPeriod, compareAfter: min(100*time.Millisecond, retryPeriod/2)}
}

// takeOver is a warm standby's leadership term. Before any worker starts it shows that
// every informer cache has seen everything written before the Lease changed hands (see
// package freshness): a standby's watches may lag (a loaded apiserver, a slow or
// half-open connection), and a worker acting on a cache without its predecessor's last
// writes would create or delete pods again. If that cannot be shown within the bound,
// the warm informers stop and the term runs cold, on informers of its own that start
// with a consistent list (see run), as a cold standby's term does.
func (m *controllerManager) takeOver(ctx context.Context, built *builtControllers) error {
	logger := klog.FromContext(ctx)
	m.readiness.SetLeading()
	caches, err := informerCaches(built.factory)
	if err == nil {
		barrier := freshness.Barrier{
			Metadata: m.takeover.reads, Caches: caches, Timeout: m.takeover.timeout,
			CompareAfter: m.takeover.compareAfter, Poll: 5 * time.Millisecond, PageSize: 500,
		}
		var result freshness.Result
		if result, err = barrier.Wait(ctx); err == nil {
			takeovers.WithLabelValues("warm").Inc()
			logger.Info("Takeover on warm caches: every cache is as new as the apiserver after acquiring the lease",
				"took", result.Took, "resourceVersion", result.Revision,
				"provenByProgress", result.ByProgress, "provenByContents", result.ByContents)
			return m.continueFresh(ctx, m.runWorkers(ctx, built))
		}
	}
	if ctx.Err() != nil {
		// A signal during the wait: nothing ran, nothing to stop.
		return nil
	}
	takeovers.WithLabelValues("cold").Inc()
	logger.Info("Warning: takeover on fresh informers: the warm caches could not be shown fresh", "err", err)
	// The warm informers are of no use any more; their handlers would only fill queues
	// that no worker drains.
	built.stopInformers()
	cold := *m
	cold.informerName = freshInformerName
	return cold.run(ctx)
}

// informerCaches returns the store of every started informer of factory and the
// resource it caches.
func informerCaches(factory informers.SharedInformerFactory) ([]freshness.Cache, error) {
	now, cancel := context.WithCancel(context.Background())
	cancel()
	var caches []freshness.Cache
	for informerType := range factory.WaitForCacheSyncWithContext(now).Synced {
		obj, ok := reflect.New(informerType.Elem()).Interface().(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("informer of %s caches no API object", informerType)
		}
		kinds, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, fmt.Errorf("finding the resource of informer %s: %w", informerType, err)
		}
		resource, _ := meta.UnsafeGuessKindToResource(kinds[0])
		// The informer of this type exists: InformerFor returns it without building one.
		caches = append(caches, freshness.Cache{Resource: resource, Store: factory.InformerFor(obj, nil).GetStore()})
	}
	sort.Slice(caches, func(i, j int) bool { return caches[i].Resource.String() < caches[j].Resource.String() })
	return caches, nil
}
