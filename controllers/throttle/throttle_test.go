package throttle

import (
	"context"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// countingLimiter counts the tokens taken from it.
type countingLimiter struct {
	flowcontrol.RateLimiter
	waits atomic.Int32
}

func (c *countingLimiter) Wait(context.Context) error { c.waits.Add(1); return nil }

func TestAPrepaidTokenPaysForOneRequest(t *testing.T) {
	bucket := &countingLimiter{}
	l := &Limiter{RateLimiter: bucket}
	ctx, err := l.Prepay(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := bucket.waits.Load(); got != 1 {
		t.Fatalf("Prepay took %d tokens, want 1", got)
	}
	// The request: already paid for, also through a derived context.
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := l.Wait(derived); err != nil {
		t.Fatal(err)
	}
	if got := bucket.waits.Load(); got != 1 {
		t.Errorf("the prepaid request took a token (%d in all, want 1)", got)
	}
	// A second request with the same context (a retry, say) pays again.
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := bucket.waits.Load(); got != 2 {
		t.Errorf("a second request with a spent prepaid token took none (%d in all, want 2)", got)
	}
	// Another limiter's token pays nothing here.
	other := &Limiter{RateLimiter: &countingLimiter{}}
	otherCtx, _ := other.Prepay(context.Background())
	if err := l.Wait(otherCtx); err != nil {
		t.Fatal(err)
	}
	if got := bucket.waits.Load(); got != 3 {
		t.Errorf("a token prepaid on another limiter was accepted (%d in all, want 3)", got)
	}
}

func TestPrepayFailsWithItsContext(t *testing.T) {
	l := New(0.001, 1)
	if _, err := l.Prepay(context.Background()); err != nil {
		t.Fatal(err) // the burst token
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Prepay(ctx); err == nil {
		t.Error("Prepay with a cancelled context and no token left succeeded")
	}
}

func TestOfFindsTheLimiterOfAClient(t *testing.T) {
	l := New(5, 10)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", RateLimiter: l})
	if err != nil {
		t.Fatal(err)
	}
	if Of(client) != l {
		t.Error("Of did not return the client's limiter")
	}
	plain, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	if Of(plain) != nil || Of(fake.NewClientset()) != nil || Of(nil) != nil {
		t.Error("Of returned a limiter for a client without one")
	}
}
