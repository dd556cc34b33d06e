package sharding

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// contactClock is the replica's clock for Lease expiry (shard, member and plan
// Leases): it advances only while the replica is in contact with the apiserver, as a
// leaderelection standby counts time (see leaderelection's standby). A stall of the
// apiserver that every replica shares then expires no Lease: the holders could not
// renew either. It can only run slower than real time, so it can only delay a
// decision that a Lease expired, never hasten it.
//
// Contact is a probe answered: the replica reads its base Lease every retry period.
// Of the time between two answers, at most maxGap (a retry period plus a request
// timeout, the most two answers are apart while the apiserver answers) counts.
type contactClock struct {
	maxGap time.Duration
	real   func() time.Time

	mu sync.Mutex
	// last is when the latest probe was answered; zero before the first answer,
	// when the clock runs as real time.
	last time.Time
	// offline is how much real time did not count.
	offline time.Duration
}

// Now returns the time in contact: real time less what did not count, frozen maxGap
// after the last answer until the next one.
func (c *contactClock) Now() time.Time {
	now := c.real()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last.IsZero() {
		return now.Add(-c.offline)
	}
	return c.last.Add(-c.offline).Add(min(now.Sub(c.last), c.maxGap))
}

// answered records a probe answered at at.
func (c *contactClock) answered(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.last.IsZero() {
		if gap := at.Sub(c.last); gap > c.maxGap {
			c.offline += gap - c.maxGap
		}
	}
	if at.After(c.last) {
		c.last = at
	}
}

// probe reads the base Lease every retry period until ctx ends; every answer, a
// NotFound too, is contact.
func (r *Replica) probe(ctx context.Context) {
	ticker := time.NewTicker(r.Timings.RetryPeriod)
	defer ticker.Stop()
	for {
		reqCtx, cancel := context.WithTimeout(ctx, r.Timings.RequestTimeout())
		_, err := r.Client.CoordinationV1().Leases(r.Namespace).Get(reqCtx, r.Base, metav1.GetOptions{})
		cancel()
		if err == nil || apierrors.IsNotFound(err) {
			r.contact.answered(r.contact.real())
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
