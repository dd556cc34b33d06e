package app

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// recordingLifecycle returns a lifecycle of the named stages that appends "start X" and
// "stop X" to *steps; the stage named failing returns err from its start.
func recordingLifecycle(steps *[]string, names []string, failing string, err error) *lifecycle {
	l := newLifecycle("test")
	for _, name := range names {
		l.add(name, func(ctx context.Context) (func(), error) {
			*steps = append(*steps, "start "+name)
			if name == failing {
				return nil, err
			}
			return func() {
				// Stopping a stage cancels its context first, so the stage can end.
				if ctx.Err() == nil {
					*steps = append(*steps, "stop "+name+" with a live context")
					return
				}
				*steps = append(*steps, "stop "+name)
			}, nil
		})
	}
	return l
}

func TestLifecycleStopsStagesInReverseOrderAfterTheWork(t *testing.T) {
	workErr := errors.New("work failed")
	for _, tc := range []struct {
		name    string
		workErr error
	}{
		{name: "clean", workErr: nil},
		{name: "work fails", workErr: workErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []string
			l := recordingLifecycle(&steps, []string{"serving", "events", "probe"}, "", nil)
			err := l.run(context.Background(), "work", func(context.Context) error {
				steps = append(steps, "work")
				return tc.workErr
			})
			if !errors.Is(err, tc.workErr) || (tc.workErr == nil && err != nil) {
				t.Errorf("run() = %v, want %v", err, tc.workErr)
			}
			want := []string{"start serving", "start events", "start probe", "work", "stop probe", "stop events", "stop serving"}
			if !slices.Equal(steps, want) {
				t.Errorf("steps = %q, want %q", steps, want)
			}
		})
	}
}

func TestLifecycleStageFailingToStartStopsTheOnesAlreadyStarted(t *testing.T) {
	startErr := errors.New("port in use")
	for _, tc := range []struct {
		name    string
		err     error
		wantErr error
	}{
		{name: "a failure is returned", err: startErr, wantErr: startErr},
		{name: "a shutdown while starting is not an error", err: errShutDownWhileStarting, wantErr: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []string
			l := recordingLifecycle(&steps, []string{"serving", "events", "probe", "informers"}, "probe", tc.err)
			err := l.run(context.Background(), "work", func(context.Context) error {
				steps = append(steps, "work")
				return nil
			})
			if err != tc.wantErr {
				t.Errorf("run() = %v, want %v", err, tc.wantErr)
			}
			want := []string{"start serving", "start events", "start probe", "stop events", "stop serving"}
			if !slices.Equal(steps, want) {
				t.Errorf("steps = %q, want %q", steps, want)
			}
		})
	}
}

type lifecycleTestKey struct{}

func TestLifecycleStagesOutliveTheWorksContextAndKeepItsValues(t *testing.T) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), lifecycleTestKey{}, "logger"))
	var stageCtx context.Context
	l := newLifecycle("test")
	l.add("informers", func(ctx context.Context) (func(), error) {
		stageCtx = ctx
		return nil, nil
	})
	err := l.run(ctx, "controllers", func(workCtx context.Context) error {
		// A signal cancels the work's context, and the work drains...
		cancel()
		<-workCtx.Done()
		// ...against stages that are still up.
		if stageCtx.Err() != nil {
			t.Error("the stage's context was cancelled with the work's, want it alive until the stage stops")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("run() = %v", err)
	}
	if stageCtx.Value(lifecycleTestKey{}) != "logger" {
		t.Error("the stage's context lost the values of run's context")
	}
	if stageCtx.Err() == nil {
		t.Error("the stage's context is still live after run returned, want it cancelled when the stage stopped")
	}
}
