package replicaset

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// podCensus follows the pods matching a label selector through a watch, from before
// the test acts until it ends. The apiserver delivers every change in resourceVersion
// order, so the census sees every state the pods went through, not samples of it:
// "never more than N active pods" holds at every resourceVersion, not only at the
// moments a poll happened to look.
type podCensus struct {
	mu sync.Mutex
	// pods holds the current version of every pod that exists.
	pods map[types.UID]*v1.Pod
	// seen holds the name of every pod that ever existed while the census ran.
	seen map[types.UID]string
	// maxActive is the largest number of active pods at any resourceVersion, and
	// maxActiveAt describes the first event that reached it.
	maxActive   int
	maxActiveAt string
	// err is the watch error that ended the census early, if any.
	err error
}

// watchPods starts a census of the pods matching labelSelector. It stops when the test
// ends.
func (e *env) watchPods(labelSelector string) *podCensus {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := e.client.CoreV1().Pods(e.ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labelSelector})
	if err != nil {
		cancel()
		e.t.Fatalf("listing pods for the census: %v", err)
	}
	c := &podCensus{pods: map[types.UID]*v1.Pod{}, seen: map[types.UID]string{}}
	for i := range list.Items {
		c.observe(watch.Added, &list.Items[i])
	}
	// A RetryWatcher resumes from the last resourceVersion it delivered when the
	// apiserver closes a watch, so no change is ever skipped.
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.LabelSelector = labelSelector
			return pods.Watch(ctx, options)
		},
	})
	if err != nil {
		cancel()
		e.t.Fatalf("watching pods for the census: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if pod, ok := ev.Object.(*v1.Pod); ok {
					c.observe(ev.Type, pod)
				}
			case watch.Error:
				c.mu.Lock()
				if c.err == nil {
					c.err = fmt.Errorf("pod census watch failed: %v", ev.Object)
				}
				c.mu.Unlock()
				return
			}
		}
	}()
	e.t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return c
}

func (c *podCensus) observe(eventType watch.EventType, pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[pod.UID] = pod.Name
	if eventType == watch.Deleted {
		delete(c.pods, pod.UID)
	} else {
		c.pods[pod.UID] = pod
	}
	active := 0
	for _, p := range c.pods {
		if isActive(p) {
			active++
		}
	}
	if active > c.maxActive {
		c.maxActive = active
		c.maxActiveAt = fmt.Sprintf("%s of pod %s at resourceVersion %s", eventType, pod.Name, pod.ResourceVersion)
	}
}

// MaxActive returns the largest number of active pods seen at once and the event that
// first reached it.
func (c *podCensus) MaxActive() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxActive, c.maxActiveAt
}

// Seen returns the names of every pod that existed while the census ran.
func (c *podCensus) Seen() map[types.UID]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[types.UID]string, len(c.seen))
	for uid, name := range c.seen {
		out[uid] = name
	}
	return out
}

// Err returns the error that ended the census early, if any.
func (c *podCensus) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
