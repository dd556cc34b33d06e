package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// newRegistry builds the registry of the compiled-in controllers.
func newRegistry() *controllers.Registry {
	return all.Registry()
}

// builtController is one controller as its constructor returned it: the manager runs
// it, under its descriptor's name, with the workers its constructor asked for.
type builtController struct {
	name       string
	controller controllers.Controller
	workers    int
}

// build calls the constructor of every enabled controller, each with a logger named
// after the controller. A nil controller is skipped; an error, or a controller asking
// for fewer than one worker (which would look like a hang), aborts the whole start,
// since running only some controllers would hide the problem.
func (m *controllerManager) build(ctx context.Context, cc controllers.Context) ([]builtController, error) {
	logger := klog.FromContext(ctx)
	var built []builtController
	enabled := sets.New(m.enabled...)
	for _, name := range m.registry.Names() {
		if !enabled.Has(name) {
			logger.Info("Warning: controller is disabled", "controller", name)
		}
	}
	for _, name := range m.enabled {
		d, ok := m.registry.Get(name)
		if !ok {
			return nil, fmt.Errorf("controller %q is enabled but not registered", name)
		}
		c, workers, err := d.Build(klog.NewContext(ctx, klog.LoggerWithName(logger, name)), cc)
		if err == nil && c != nil && workers < 1 {
			err = fmt.Errorf("it needs at least 1 worker, got %d", workers)
		}
		if err != nil {
			logger.Error(err, "Error building a controller", "controller", name)
			return nil, fmt.Errorf("building controller %s: %w", name, err)
		}
		if c == nil {
			logger.Info("Warning: skipping controller", "controller", name)
			continue
		}
		// From now on /readyz waits for this controller's caches.
		cc.Caches.Expect(name)
		built = append(built, builtController{name: name, controller: c, workers: workers})
	}
	return built, nil
}

// runControllers runs each controller in a goroutine of its own until ctx is cancelled,
// then waits for them, logging every shutdownTimeout/3 which ones are still running.
func (m *controllerManager) runControllers(ctx context.Context, built []builtController) error {
	logger := klog.FromContext(ctx)
	var (
		mu      sync.Mutex
		running = sets.New[string]()
		wg      sync.WaitGroup
	)
	for _, c := range built {
		name := c.name
		running.Insert(name)
		wg.Go(func() {
			defer func() {
				mu.Lock()
				running.Delete(name)
				mu.Unlock()
				logger.V(1).Info("Controller stopped", "controller", name)
			}()
			if m.startInterval > 0 {
				select {
				case <-time.After(wait.Jitter(m.startInterval, 1.0)):
				case <-ctx.Done():
					return
				}
			}
			logger.V(1).Info("Starting controller", "controller", name)
			c.controller.Run(klog.NewContext(ctx, klog.LoggerWithName(logger, name)), c.workers)
		})
	}
	stillRunning := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return sets.List(running)
	}
	allStopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(allStopped)
	}()
	logger.Info("Controllers started", "controllers", stillRunning())

	if len(built) == 0 {
		<-ctx.Done()
	} else {
		select {
		case <-ctx.Done():
		case <-allStopped:
			// Both may be ready at once (a shutdown stops every controller); select
			// picks either, so only a context still live makes this an error.
			if ctx.Err() == nil {
				return errors.New("every controller stopped although mini-kcm is not shutting down")
			}
		}
	}

	logger.Info("Stopping controllers", "timeout", m.shutdownTimeout)
	var timeout <-chan time.Time
	if m.shutdownTimeout > 0 {
		timer := time.NewTimer(m.shutdownTimeout)
		defer timer.Stop()
		timeout = timer.C
	}
	logEvery := m.shutdownTimeout / 3
	if logEvery <= 0 {
		logEvery = 5 * time.Second
	}
	ticker := time.NewTicker(logEvery)
	defer ticker.Stop()
	for {
		select {
		case <-allStopped:
			logger.Info("All controllers stopped")
			return nil
		case <-ticker.C:
			logger.Info("Still waiting for controllers to terminate", "runningControllers", stillRunning())
		case <-timeout:
			running := stillRunning()
			logger.Info("Controller shutdown timeout reached", "timeout", m.shutdownTimeout, "runningControllers", running)
			// The stuck goroutines end with the process, which exits next.
			return fmt.Errorf("controller shutdown timeout (%s) reached with %v: %w",
				m.shutdownTimeout, running, leaderelection.ErrControllersStillRunning)
		}
	}
}
