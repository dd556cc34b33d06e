package serving

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// The health endpoints are k8s.io/apiserver's healthz handlers, with their semantics:
// /livez, /healthz and /readyz (anonymous, see --authorization-always-allow-paths) say
// which checks failed, "reason withheld" even under ?verbose, and log the reasons at
// -v=2; /<endpoint>/<check> answers with the reason and is authorized like /metrics,
// because the reasons name objects, informers and the apiserver's address.

// stuckSyncCheck fails while a controller has been in one sync for longer than the
// --controller-sync-stuck-threshold, naming the controller and the key.
func stuckSyncCheck(syncs *controllers.InFlightSyncs) healthz.HealthChecker {
	return healthz.NamedCheck(syncs.Name(), func(*http.Request) error { return syncs.Check() })
}

// HealthChecks are the checks of the three health endpoints.
type HealthChecks struct {
	livez, healthz, readyz []healthz.HealthChecker
}

// NewHealthChecks lists the checks: /livez and /healthz are the process (ping, no stuck
// sync) and the leader-election watchdog when there is one (nil without election);
// /readyz is the apiserver and where this replica stands (see Readiness).
func NewHealthChecks(syncs *controllers.InFlightSyncs, watchdog *leaderelection.Watchdog, probe *APIServerProbe, ready *Readiness) HealthChecks {
	live := []healthz.HealthChecker{healthz.PingHealthz, stuckSyncCheck(syncs)}
	if watchdog != nil {
		// /livez carries the watchdog too: a wedged leader is exactly what a liveness
		// probe must restart, and deploy/ probes /livez.
		live = append(live, watchdog)
	}
	return HealthChecks{
		livez:   live,
		healthz: live,
		readyz:  append([]healthz.HealthChecker{healthz.PingHealthz, healthz.NamedCheck("apiserver", probe.check)}, ready.Checks()...),
	}
}

// install installs the three endpoints, and one path per check beneath each, on m.
func (c HealthChecks) install(m *mux.PathRecorderMux) {
	healthz.InstallLivezHandler(m, c.livez...)
	healthz.InstallHandler(m, c.healthz...)
	healthz.InstallReadyzHandler(m, c.readyz...)
}

// APIServerProbe asks the apiserver's /healthz, once at start until it answers and then
// periodically, and remembers the last answer for /readyz.
type APIServerProbe struct {
	client rest.Interface
	// host names the apiserver in messages.
	host string
	// timeout bounds one request.
	timeout time.Duration

	mu      sync.Mutex
	lastErr error
}

// NewAPIServerProbe returns a probe of the apiserver at host (named in messages) through
// client; until its first answer, /readyz fails with "not contacted yet".
func NewAPIServerProbe(client rest.Interface, host string) *APIServerProbe {
	return &APIServerProbe{
		client:  client,
		host:    host,
		timeout: 5 * time.Second,
		lastErr: fmt.Errorf("apiserver %s not contacted yet", host),
	}
}

// probe asks /healthz once, records the result and logs when it changes.
func (p *APIServerProbe) probe(ctx context.Context) error {
	requestCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var status int
	result := p.client.Get().AbsPath("/healthz").Do(requestCtx).StatusCode(&status)
	if ctx.Err() != nil {
		// Shutting down, or the caller stopped waiting: this says nothing about the
		// apiserver, so keep the last real answer.
		return ctx.Err()
	}
	err := result.Error()
	switch {
	case err != nil:
		err = fmt.Errorf("apiserver %s is not healthy: %w", p.host, err)
	case status != http.StatusOK:
		body, _ := result.Raw()
		err = fmt.Errorf("apiserver %s is not healthy: /healthz returned %d: %s", p.host, status, body)
	}

	p.mu.Lock()
	wasHealthy := p.lastErr == nil
	p.lastErr = err
	p.mu.Unlock()
	logger := klog.FromContext(ctx)
	switch {
	case wasHealthy && err != nil:
		logger.Info("Lost contact with the apiserver", "err", err)
	case !wasHealthy && err == nil:
		logger.Info("The apiserver is healthy", "server", p.host)
	}
	return err
}

// check reports the last probe's result, for /readyz.
func (p *APIServerProbe) check(*http.Request) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// WaitUntilHealthy probes with a growing delay (200ms doubling up to 2s) until the
// apiserver answers, timeout passes or ctx is cancelled. Components often start together
// with their apiserver, so a few seconds of refusal are normal, not an error.
func (p *APIServerProbe) WaitUntilHealthy(ctx context.Context, timeout time.Duration) error {
	logger := klog.FromContext(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := p.probe(waitCtx)
		if err == nil {
			return nil
		}
		if attempt == 0 {
			logger.Info("Waiting for the apiserver", "server", p.host, "err", err)
		} else {
			logger.V(1).Info("Still waiting for the apiserver", "err", err)
		}
		select {
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("the apiserver at %s did not become healthy within %s (last error: %v); check that it is "+
				"running and reachable from this host, and that --kubeconfig or --master point at it", p.host, timeout, p.check(nil))
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// Run probes every interval until ctx is cancelled.
func (p *APIServerProbe) Run(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_ = p.probe(ctx) // recorded and logged by probe
		}
	}
}
