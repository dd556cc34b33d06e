package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// healthCheck is one named check of /livez, /healthz or /readyz.
type healthCheck struct {
	name  string
	check func(r *http.Request) error
}

// ping always passes: it proves the process serves HTTP.
var ping = healthCheck{name: "ping", check: func(*http.Request) error { return nil }}

// stuckSyncCheck fails while a controller has been in one sync for longer than the
// --controller-sync-stuck-threshold, naming the controller and the key.
func stuckSyncCheck(syncs *controllers.InFlightSyncs) healthCheck {
	return healthCheck{name: syncs.Name(), check: func(*http.Request) error { return syncs.Check() }}
}

// checksHandler serves a fixed list of checks in the format of Kubernetes components:
// "ok" when all pass; with ?verbose one "[+]name ok" or "[-]name failed: reason" line per
// check; ?exclude=name skips a check. A failure answers 500 and lists every check, with
// reasons only under ?verbose, like upstream's "reason withheld".
type checksHandler struct {
	// endpoint is the path without its slash, used in the summary line.
	endpoint string
	checks   []healthCheck
}

func (h checksHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	_, verbose := query["verbose"]
	excluded := sets.New[string]()
	for _, names := range query["exclude"] {
		for _, name := range strings.Split(names, ",") {
			excluded.Insert(strings.TrimSpace(name))
		}
	}

	var out bytes.Buffer
	var failed []string
	for _, c := range h.checks {
		if excluded.Has(c.name) {
			excluded.Delete(c.name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
			continue
		}
		err := c.check(r)
		switch {
		case err == nil:
			fmt.Fprintf(&out, "[+]%s ok\n", c.name)
		case verbose:
			failed = append(failed, c.name)
			fmt.Fprintf(&out, "[-]%s failed: %v\n", c.name, err)
		default:
			failed = append(failed, c.name)
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
		}
		if err != nil {
			klog.FromContext(r.Context()).V(2).Info("Health check failed", "endpoint", h.endpoint, "check", c.name, "err", err)
		}
	}
	if excluded.Len() > 0 {
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n",
			strings.Join(quoteAll(sets.List(excluded)), ","))
	}

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache, private")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%s%s check failed\n", out.String(), h.endpoint)
		return
	}
	if verbose {
		fmt.Fprintf(w, "%s%s check passed\n", out.String(), h.endpoint)
		return
	}
	fmt.Fprint(w, "ok")
}

func quoteAll(names []string) []string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return quoted
}

// role is where this replica stands, as /readyz sees it.
type role int

const (
	// roleStarting: serving, but not yet in the election (waiting for the apiserver).
	roleStarting role = iota
	// roleStandby: campaigning for the Lease without holding it.
	roleStandby
	// roleLeading: running controllers (also without leader election).
	roleLeading
)

// readiness tracks what /readyz reports: ready once this replica is a healthy standby
// or a leader whose controllers' caches synced, and not ready once it shuts down. A warm
// standby (one whose informers run, see --leader-elect-warm-standby) is healthy once
// those informers synced, that is once it could lead at once; a cold standby has nothing
// to sync.
type readiness struct {
	mu       sync.Mutex
	role     role
	caches   *controllers.CacheSyncTracker
	stopping bool
	// informers lists the shared informers that have not synced; nil until they started.
	informers func() []string
}

func (r *readiness) setStandby() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role = roleStandby
}

// setLeading marks the start of a leadership term; /readyz stays false until
// setControllersBuilt hands over the term's cache tracker.
func (r *readiness) setLeading() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role, r.caches = roleLeading, nil
}

func (r *readiness) setControllersBuilt(caches *controllers.CacheSyncTracker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.caches = caches
}

// setInformers hands over the check of the started shared informers.
func (r *readiness) setInformers(unsynced func() []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.informers = unsynced
}

func (r *readiness) setStopping() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopping = true
}

// readinessState is a copy of what readiness tracks, for /statusz.
type readinessState struct {
	role   role
	caches *controllers.CacheSyncTracker
	// informers is nil until the shared informers started.
	informers func() []string
	stopping  bool
}

func (r *readiness) state() readinessState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return readinessState{role: r.role, caches: r.caches, informers: r.informers, stopping: r.stopping}
}

// checks returns the /readyz checks besides ping and the apiserver.
func (r *readiness) checks() []healthCheck {
	return []healthCheck{
		{name: "controllers", check: func(*http.Request) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			switch {
			case r.role == roleStarting:
				return errors.New("waiting for the apiserver before starting")
			case r.role == roleStandby && r.informers != nil:
				if unsynced := r.informers(); len(unsynced) > 0 {
					return fmt.Errorf("warm standby: informers not synced yet: %s", strings.Join(unsynced, ", "))
				}
				return nil
			case r.role == roleStandby:
				return nil
			case r.caches == nil:
				return errors.New("leading, building controllers")
			default:
				return r.caches.Check()
			}
		}},
		{name: "shutdown", check: func(*http.Request) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.stopping {
				return errors.New("shutting down")
			}
			return nil
		}},
	}
}

// apiServerProbe asks the apiserver's /healthz, once at start until it answers and then
// periodically, and remembers the last answer for /readyz.
type apiServerProbe struct {
	client rest.Interface
	// host names the apiserver in messages.
	host string
	// timeout bounds one request.
	timeout time.Duration

	mu      sync.Mutex
	lastErr error
}

func newAPIServerProbe(client rest.Interface, host string) *apiServerProbe {
	return &apiServerProbe{
		client:  client,
		host:    host,
		timeout: 5 * time.Second,
		lastErr: fmt.Errorf("apiserver %s not contacted yet", host),
	}
}

// probe asks /healthz once, records the result and logs when it changes.
func (p *apiServerProbe) probe(ctx context.Context) error {
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
func (p *apiServerProbe) check(*http.Request) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// waitUntilHealthy probes with a growing delay (200ms doubling up to 2s) until the
// apiserver answers, timeout passes or ctx is cancelled. Components often start together
// with their apiserver, so a few seconds of refusal are normal, not an error.
func (p *apiServerProbe) waitUntilHealthy(ctx context.Context, timeout time.Duration) error {
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

// run probes every interval until ctx is cancelled.
func (p *apiServerProbe) run(ctx context.Context, interval time.Duration) {
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
