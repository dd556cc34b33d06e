package app

import (
	"context"
	"errors"

	"k8s.io/klog/v2"
)

// errShutDownWhileStarting is returned by a stage's start that gave up because the
// shutdown began before the stage was up (the apiserver wait, for instance). It is not a
// failure: the lifecycle stops the stages already started and returns nil.
var errShutDownWhileStarting = errors.New("shut down while starting")

// lifecycle is the one place where the order of a run is written down: stages are added
// in start order, started one after the other, and stopped in reverse order once the
// work that needs them returned, as controller-runtime's manager does with its
// runnables. run and controllerManager.run each list theirs: the process (serving, event
// broadcaster, apiserver probe, then the election or the controllers) and a leadership
// term (informers, then the controllers).
//
// A stage runs with a context of its own. It carries the values (the logger) of the
// context run was given but not its cancellation: a shutdown signal stops the work
// first, and a stage only when its turn comes, so the controllers drain against live
// informers and events are still recorded while the election ends. Stopping a stage
// cancels its context, then calls the stop function its start returned, which must
// wait until everything the stage started has ended.
type lifecycle struct {
	// name tells the lifecycle's log lines apart ("process", "term").
	name   string
	stages []stage
}

// stage is one named step of a lifecycle.
type stage struct {
	name string
	// start starts the stage and returns once it is up. It must not block until
	// shutdown: that is what the lifecycle's work does. stop may be nil.
	start func(ctx context.Context) (stop func(), err error)
}

func newLifecycle(name string) *lifecycle {
	return &lifecycle{name: name}
}

// add appends a stage; stages start in the order they were added.
func (l *lifecycle) add(name string, start func(ctx context.Context) (stop func(), err error)) {
	l.stages = append(l.stages, stage{name: name, start: start})
}

// run starts the stages in order, then runs work, the last stage, with ctx until it
// returns, and stops the started stages in reverse order before returning work's
// error. If a stage fails to start, the stages before it are stopped in reverse order,
// work never runs and run returns the start error (nil for errShutDownWhileStarting).
func (l *lifecycle) run(ctx context.Context, workName string, work func(ctx context.Context) error) error {
	logger := klog.FromContext(ctx)
	type running struct {
		name   string
		cancel context.CancelFunc
		stop   func()
	}
	var started []running
	defer func() {
		for i := len(started) - 1; i >= 0; i-- {
			s := started[i]
			logger.Info("Stopping stage", "lifecycle", l.name, "stage", s.name)
			s.cancel()
			if s.stop != nil {
				s.stop()
			}
		}
	}()

	for _, s := range l.stages {
		logger.Info("Starting stage", "lifecycle", l.name, "stage", s.name)
		stageCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stop, err := s.start(stageCtx)
		if err != nil {
			cancel()
			if errors.Is(err, errShutDownWhileStarting) {
				logger.Info("Shut down while starting a stage", "lifecycle", l.name, "stage", s.name)
				return nil
			}
			return err
		}
		started = append(started, running{name: s.name, cancel: cancel, stop: stop})
	}
	logger.Info("Starting stage", "lifecycle", l.name, "stage", workName)
	return work(ctx)
}
