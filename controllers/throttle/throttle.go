// Package throttle is the client-side rate limiter of mini-kcm's clients
// (--kube-api-qps, --kube-api-burst) with one addition: a controller may take the token
// of a write before it builds the write.
//
// A controller that writes faster than its rate limit allows waits for a token inside
// the client, after it decided what to write. The Endpoints controller, say, reads a
// Service's pods, builds its Endpoints, then waits; pods that change during the wait
// make that write stale before it is sent, and need another one after it. Taking the
// token first and building the write afterwards sends the freshest state for the same
// token, so fewer writes say the same thing, and the last one lands sooner.
package throttle

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
)

// Limiter is a token bucket whose tokens can be paid for ahead of a request. It
// implements flowcontrol.RateLimiter, for rest.Config.RateLimiter.
type Limiter struct {
	flowcontrol.RateLimiter
}

// New returns a Limiter of qps tokens per second and burst tokens at most.
func New(qps float32, burst int) *Limiter {
	return &Limiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(qps, burst)}
}

// prepaidKey keys the prepaid token of a Limiter in a context.
type prepaidKey struct{ limiter *Limiter }

// Wait waits for a token, unless ctx carries one paid ahead on this limiter that no
// request has used yet.
func (l *Limiter) Wait(ctx context.Context) error {
	if paid, ok := ctx.Value(prepaidKey{l}).(*atomic.Bool); ok && paid.CompareAndSwap(true, false) {
		return nil
	}
	return l.RateLimiter.Wait(ctx)
}

// Prepay waits for a token and returns a context that carries it: the first request
// made with that context (or one derived from it) through a client of this limiter
// does not wait again. Any later request, a retry say, waits as usual.
func (l *Limiter) Prepay(ctx context.Context) (context.Context, error) {
	if err := l.RateLimiter.Wait(ctx); err != nil {
		return ctx, err
	}
	paid := &atomic.Bool{}
	paid.Store(true)
	return context.WithValue(ctx, prepaidKey{l}, paid), nil
}

// Of returns the Limiter of client, or nil if it has none (a fake clientset, or a
// client built without this package).
func Of(client kubernetes.Interface) *Limiter {
	if client == nil {
		return nil
	}
	l, _ := client.CoreV1().RESTClient().GetRateLimiter().(*Limiter)
	return l
}
