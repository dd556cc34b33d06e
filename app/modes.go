package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/sharding"
)

// The run modes: run picks one of these by the replica's mode; each adds its own stages
// to the ones every mode shares (replica.processStages).

// runWithoutElection (--leader-elect=false) runs the controllers at once, until ctx ends.
func (r *replica) runWithoutElection(ctx context.Context, process *lifecycle) error {
	built := r.manager.addStages(process)
	return process.run(ctx, "controllers", whileWatchingUpstream(r.upstream, func(ctx context.Context) error {
		return r.manager.continueFresh(ctx, r.manager.runWorkers(ctx, built))
	}))
}

// runSharded is active-active: the namespaces are cut into shards, and this replica
// runs the controllers on its fair share of them; see sharding.Replica.
func (r *replica) runSharded(ctx context.Context, process *lifecycle) error {
	shards, err := r.newShardedReplica()
	if err != nil {
		return err
	}
	r.status.shards = shards.Status
	return process.run(ctx, "shards", func(ctx context.Context) error {
		// The apiserver's half of the fence needs one binding per shard; without
		// them a shard's stale holder would be fenced in-process only.
		if r.mode.apiserverFence {
			if err := sharding.CheckFenceBindings(ctx, r.probeClient, r.mode.namespace, r.mode.name, r.mode.shards); err != nil {
				return err
			}
		}
		return shards.Run(ctx)
	})
}

// runWarmStandby (the default) builds the controllers and syncs the informers before
// and during the election, so that leading only starts the workers: the election runs
// a term of workers while leading and releases the Lease after the workers drained;
// the informers stop after that. leaderelection owns the release order.
func (r *replica) runWarmStandby(ctx context.Context, process *lifecycle) error {
	if err := r.withFreshnessBarrier(); err != nil {
		return err
	}
	return process.run(ctx, "election", func(ctx context.Context) error {
		return campaignUntilShutdown(ctx, func(ctx context.Context) error {
			// Each campaign builds the controllers anew: a lost term's shut its
			// queues down.
			standby := newLifecycle("standby")
			built := r.manager.addStages(standby)
			return standby.run(ctx, "election", func(ctx context.Context) error {
				return r.campaignWarm(ctx, built)
			})
		})
	})
}

// campaignWarm campaigns with the warm informers of built, and takes over on them. A
// standby whose apiserver is replaced meanwhile (see runWorkers) ends its campaign with
// errFreshInformers, to campaign again on fresh informers at once, instead of waiting
// for its reflectors to relist after a round of backoff; a leader's term goes on with
// fresh informers itself.
func (r *replica) campaignWarm(ctx context.Context, built *builtControllers) error {
	campaignCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu                sync.Mutex
		leading, replaced bool
		watching          sync.WaitGroup
	)
	if ch := r.manager.replacements(); ch != nil {
		watching.Go(func() {
			select {
			case <-ch:
				mu.Lock()
				defer mu.Unlock()
				if !leading {
					replaced = true
					cancel()
				}
			case <-campaignCtx.Done():
			}
		})
	}
	err := r.campaign(campaignCtx, func(ctx context.Context) error {
		mu.Lock()
		leading = true
		stale := replaced
		mu.Unlock()
		if stale {
			// Acquired as the campaign was called off: hand the Lease back at once.
			return nil
		}
		return r.manager.takeOver(ctx, built)
	})
	cancel()
	watching.Wait()
	mu.Lock()
	defer mu.Unlock()
	if replaced && ctx.Err() == nil {
		return fmt.Errorf("%w: the apiserver was replaced while standing by", errFreshInformers)
	}
	return err
}

// runColdStandby (--leader-elect-warm-standby=false) only campaigns: the election runs
// a whole term (informers, then controllers, see controllerManager.run) while leading
// and releases the Lease after the term ended.
func (r *replica) runColdStandby(ctx context.Context, process *lifecycle) error {
	if err := r.withFreshnessBarrier(); err != nil {
		return err
	}
	return process.run(ctx, "election", func(ctx context.Context) error {
		return campaignUntilShutdown(ctx, func(ctx context.Context) error {
			return r.campaign(ctx, r.manager.run)
		})
	})
}

// withFreshnessBarrier readies the barrier that shows a term's caches fresh: a warm
// standby's at its takeover, and every single leader's when it resumes after a long
// pause (controllerManager.resume).
func (r *replica) withFreshnessBarrier() error {
	reads, err := r.builder.Config("takeover-barrier")
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(reads)
	if err != nil {
		return fmt.Errorf("building the takeover barrier's client: %w", err)
	}
	r.manager.takeover = newTakeoverBarrier(metadataClient, r.mode.timings.RetryPeriod)
	r.manager.terms = newTermInformers()
	return nil
}

// campaignUntilShutdown campaigns again each time a term lost the Lease, or a warm
// standby called its campaign off for fresh informers, until ctx is cancelled: a lost
// Lease makes this replica a standby, not an exit. A term whose
// workers did not stop in time ends the process instead (its error is returned).
func campaignUntilShutdown(ctx context.Context, campaignOnce func(ctx context.Context) error) error {
	for {
		err := campaignOnce(ctx)
		if errors.Is(err, errFreshInformers) && ctx.Err() == nil {
			klog.FromContext(ctx).Info("Standing by again on fresh informers", "reason", err)
			continue
		}
		if !errors.Is(err, leaderelection.ErrLeaseLost) || errors.Is(err, leaderelection.ErrControllersStillRunning) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		klog.FromContext(ctx).Info("Standing by again: the lost term's controllers drained")
	}
}

// campaign joins the election for the mode's Lease and runs term, while watching for
// kube-controller-manager running our controllers too, while leading.
func (r *replica) campaign(ctx context.Context, term func(context.Context) error) error {
	client, leaseWatch, err := r.mode.electionClients(r.cfg.RESTConfig, "leader-election")
	if err != nil {
		return err
	}
	election := r.status.election
	election.joined(r.mode.identity)
	r.ready.SetStandby()
	config := r.mode.election(client)
	config.EventRecorder = r.events.Recorder(eventComponent)
	config.WatchDog, config.Fence, config.Observe = r.watchdog, r.mode.fence, election.observe
	// A term that paused for a lease or longer shows its caches fresh before it writes.
	if r.manager.terms != nil {
		config.Resume = r.manager.resume
	}
	// A standby watches the Lease, so that it tries to take it the moment it expires.
	config.LeaseWatch = leaseWatch
	return leaderelection.Run(ctx, config, whileWatchingUpstream(r.upstream, term))
}
