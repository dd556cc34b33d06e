package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// leasePollInterval bounds how late a change of holder is seen, and so the precision
// of the takeover times.
const leasePollInterval = 50 * time.Millisecond

// holderChange is one change of the Lease's holder as seen by the watcher. An empty
// holder means nobody holds the Lease: it does not exist yet, or it was released.
type holderChange struct {
	at       time.Time
	from, to string
}

// leaseWatcher polls the Lease and prints every change of its holder. Polling, rather
// than a watch, keeps going unchanged through apiserver hiccups, and its interval is
// far below the takeover times it measures.
type leaseWatcher struct {
	client          kubernetes.Interface
	namespace, name string
	printer         *printer
	// describe names a holder identity for the reader (the replica it belongs to).
	describe func(identity string) string

	mu      sync.Mutex
	holder  string
	changes []holderChange
}

// run polls until ctx ends.
func (w *leaseWatcher) run(ctx context.Context) {
	ticker := time.NewTicker(leasePollInterval)
	defer ticker.Stop()
	for {
		// A failed read is retried at the next tick: the holder is unknown, not changed.
		if holder, err := framework.LeaseHolder(ctx, w.client, w.namespace, w.name); err == nil {
			w.observe(time.Now(), holder)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (w *leaseWatcher) observe(at time.Time, holder string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if holder == w.holder {
		return
	}
	change := holderChange{at: at, from: w.holder, to: holder}
	w.changes = append(w.changes, change)
	w.holder = holder
	w.printer.event(at, "lease holder: %s -> %s", w.describeHolder(change.from), w.describeHolder(change.to))
}

func (w *leaseWatcher) describeHolder(identity string) string {
	if identity == "" {
		return "<none>"
	}
	return w.describe(identity)
}

// waitFor returns the first change after since that accept takes, waiting up to
// timeout for it.
func (w *leaseWatcher) waitFor(ctx context.Context, since time.Time, timeout time.Duration, what string, accept func(holderChange) bool) (holderChange, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(leasePollInterval / 2)
	defer ticker.Stop()
	for {
		w.mu.Lock()
		for _, c := range w.changes {
			if !c.at.Before(since) && accept(c) {
				w.mu.Unlock()
				return c, nil
			}
		}
		holder := w.holder
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return holderChange{}, fmt.Errorf("waiting %v for %s: %w (the lease is held by %q)", timeout, what, ctx.Err(), holder)
		case <-ticker.C:
		}
	}
}

// newHolder waits for a holder other than previous, nobody included, since a moment.
func (w *leaseWatcher) newHolder(ctx context.Context, previous string, since time.Time, timeout time.Duration) (holderChange, error) {
	return w.waitFor(ctx, since, timeout, "a new leader", func(c holderChange) bool {
		return c.to != "" && c.to != previous
	})
}
