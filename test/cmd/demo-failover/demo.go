package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/sample"
)

// config is what the command line sets.
type config struct {
	// binary is the mini-kcm binary.
	binary string
	// deployDir holds the kustomization of deploy/, and sample/ below it.
	deployDir string
	// dir, when set, keeps the control plane's state and the logs there.
	dir string
	// timeline, when set, is the path of the SVG timeline of the demo.
	timeline string
}

// The names deploy/ gives mini-kcm's workload and identity.
const (
	statefulSetName = "mini-kcm"
	containerName   = "mini-kcm"
	saNamespace     = "kube-system"
	saName          = "mini-kcm"
	replicaCount    = 3
	fieldManager    = "demo-failover"
)

// Generous bounds for a loaded 2-core machine; none is expected to be reached.
const (
	electionTimeout = time.Minute
	rolloutTimeout  = 90 * time.Second
	exitTimeout     = 30 * time.Second
)

// takeover is what one failover measured.
type takeover struct {
	// signal stopped the leader: SIGTERM, SIGKILL or SIGSTOP (a freeze, resumed with
	// SIGCONT once another replica took over).
	signal syscall.Signal
	// from and to name the old and the new leader.
	from, to string
	// took is the time from the signal until the Lease showed the new holder.
	took time.Duration
	// exited is the time from the signal (from SIGCONT after a freeze) until the old
	// leader's process ended, and exitCode its exit code (-1 when the signal killed it);
	// after a freeze, the time until the old leader stepped down (steppedDown), still
	// running.
	exited      time.Duration
	exitCode    int
	steppedDown bool
	// released reports whether the old leader logged that it released the Lease.
	released bool
	// scaledTo and reconciled are the sample app's new size after the takeover and the
	// time the new leader took to roll it out.
	scaledTo   int32
	reconciled time.Duration
}

// result is what the demo measured, for the test.
type result struct {
	takeovers []takeover
	// dataRaces names the replicas whose log reports a data race (race-detector
	// builds only).
	dataRaces []string
	// leaderBefore and leaderAfter are the output of `mini-kcm leader`.
	leaderBefore, leaderAfter string
	// writes counts the writes of the replicas the apiserver accepted, and staleWrites
	// lists those it accepted from a replica that did not hold the Lease.
	writes      int
	staleWrites []write
}

// demo is the state of one run.
type demo struct {
	cfg config
	// p prints the story.
	p *printer
	// cp is the local control plane.
	cp *controlplane.ControlPlane
	// manifests are the objects of deploy/'s kustomization.
	manifests []install.Manifest
	// app is the sample app of deploy/sample/.
	app *sample.App
	// lease watches the Lease the replicas elect their leader with.
	lease *leaseWatcher
	// podArgs are the StatefulSet container's flags without the pod-only ones.
	podArgs []string
	// leaseNS and leaseName locate the Lease, as the container's flags set it.
	leaseNS, leaseName string
	// timings describes the election timings the replicas run with, for the reader.
	timings string
	// replicas are the three stand-ins for the StatefulSet's pods.
	replicas []*replica
	// mu guards names, which the Lease watcher reads from its goroutine.
	mu sync.Mutex
	// names maps every identity a replica ever had to the replica's name, so that the
	// Lease's history stays readable after a replica restarted with a new identity.
	names map[string]string
	// marks are the signals sent, for the timeline.
	marks []mark
}

// run tells the story on out and returns what it measured. Everything it starts is
// stopped before it returns; on failure, the end of every replica's log is printed
// first.
func run(ctx context.Context, out io.Writer, cfg config) (res result, err error) {
	d := &demo{cfg: cfg, p: newPrinter(out), names: map[string]string{}}
	if d.cfg.binary, err = filepath.Abs(cfg.binary); err != nil {
		return res, err
	}
	if _, err := os.Stat(d.cfg.binary); err != nil {
		return res, fmt.Errorf("mini-kcm binary: %w; build it first (make build)", err)
	}
	if err := d.readManifests(); err != nil {
		return res, err
	}

	d.p.step("Local control plane: etcd, kube-apiserver, kube-scheduler and KWOK with 3 fake nodes (no Docker)")
	d.cp, err = controlplane.Start(ctx, controlplane.Options{
		Dir: cfg.dir, Scheduler: true, KWOK: true, Nodes: 3,
		Logf: func(format string, args ...any) { d.p.info(format, args...) },
	})
	if err != nil {
		return res, err
	}
	defer func() { res.dataRaces = d.stopAll() }()
	defer func() {
		if err != nil {
			d.printLogTails()
		}
	}()

	if err := d.install(ctx); err != nil {
		return res, err
	}
	// Watched from here on, once every replica's identity is known, so that each
	// holder prints as the replica it is.
	watchCtx, stopWatching := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer func() {
		stopWatching()
		watching.Wait()
	}()
	d.lease = &leaseWatcher{client: d.cp.Client(), namespace: d.leaseNS, name: d.leaseName, printer: d.p, describe: d.describe}
	watching.Go(func() { d.lease.run(watchCtx) })
	// The first term may well have started while the replicas were being listed.
	leader, _, err := d.waitForLeader(ctx, "", time.Time{})
	if err != nil {
		return res, err
	}
	if res.leaderBefore, err = d.showLeader(ctx, "before the failovers"); err != nil {
		return res, err
	}
	if err := d.deploySample(ctx); err != nil {
		return res, err
	}

	d.p.step("Failover 1: SIGTERM to the leader %s, as when its pod is deleted or rolled", leader)
	graceful, leader, err := d.failover(ctx, leader, syscall.SIGTERM, 4)
	if err != nil {
		return res, err
	}
	res.takeovers = append(res.takeovers, graceful)

	d.p.step("Failover 2: SIGKILL to the leader %s, as when its node dies or it is OOM-killed", leader)
	crash, leader, err := d.failover(ctx, leader, syscall.SIGKILL, 5)
	if err != nil {
		return res, err
	}
	res.takeovers = append(res.takeovers, crash)

	d.p.step("Failover 3: SIGSTOP to the leader %s in the middle of a scale-up, as a long GC pause, a VM migration or CPU throttling freezes it; SIGCONT once another replica took over", leader)
	frozen, _, err := d.freeze(ctx, leader, 12, 6)
	if err != nil {
		return res, err
	}
	res.takeovers = append(res.takeovers, frozen)

	if res.leaderAfter, err = d.showLeader(ctx, "after the failovers"); err != nil {
		return res, err
	}
	// Every request was made with the ServiceAccount's token and so with exactly the
	// RBAC of deploy/; a missing permission shows up as a "forbidden" error in a log.
	if forbidden := d.grepLogs("forbidden"); len(forbidden) > 0 {
		return res, fmt.Errorf("replicas were forbidden requests with the RBAC of %s:\n%s", d.cfg.deployDir, strings.Join(forbidden, "\n"))
	}

	d.p.step("Summary (%s)", d.timings)
	d.p.info("RBAC: every replica ran with a token of ServiceAccount %s/%s and none was forbidden a request", saNamespace, saName)
	d.p.info("takeover after SIGTERM: %-7s %s released the Lease on its way out; a standby acquires a released Lease at its next retry",
		seconds(graceful.took), d.describe(graceful.from))
	d.p.info("takeover after SIGKILL: %-7s nothing was released; a standby acquires the Lease once a lease duration passed since it last saw it renewed",
		seconds(crash.took))
	d.p.info("takeover after SIGSTOP: %-7s a frozen leader cannot renew; a standby acquires the Lease once a lease duration passed. Resumed, the old leader stepped down %s later and stands by, without a restart",
		seconds(frozen.took), seconds(frozen.exited))
	d.p.info("after each takeover the new leader scaled the sample app (to %d, %d, then %d) within %s, %s and %s", graceful.scaledTo, crash.scaledTo,
		frozen.scaledTo, seconds(graceful.reconciled), seconds(crash.reconciled), seconds(frozen.reconciled))

	tl, err := d.timeline()
	if err != nil {
		return res, err
	}
	res.writes, res.staleWrites = len(tl.writes), tl.staleWrites()
	d.p.info("the audit log holds %d writes of the replicas' controllers; %d of them were accepted from a replica that did not hold the Lease",
		res.writes, len(res.staleWrites))
	for _, w := range res.staleWrites {
		d.p.info("  %s %s: %s -> %d", clock(w.at), w.replica, w.what, w.code)
	}
	if d.cfg.timeline != "" {
		f, err := os.Create(d.cfg.timeline)
		if err != nil {
			return res, fmt.Errorf("writing the timeline: %w", err)
		}
		err = tl.writeSVG(f, fmt.Sprintf("mini-kcm failover: who held the Lease, who wrote (%s)", d.timings))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return res, fmt.Errorf("writing the timeline: %w", err)
		}
		d.p.info("timeline: %s", d.cfg.timeline)
	}
	return res, nil
}

// timeline reads the Lease's history and the audit log into a timeline.
func (d *demo) timeline() (*timeline, error) {
	events, err := d.cp.ReadAuditLog()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	names := map[string]string{}
	for identity, name := range d.names {
		names[identity] = name
	}
	d.mu.Unlock()
	credentials := map[string]string{}
	var replicas []string
	for _, r := range d.replicas {
		credentials[r.credential] = r.name
		replicas = append(replicas, r.name)
	}
	d.lease.mu.Lock()
	changes := slices.Clone(d.lease.changes)
	d.lease.mu.Unlock()
	return buildTimeline(changes, events, credentials, names, replicas, d.marks, time.Now()), nil
}

// readManifests reads deploy/ and deploy/sample/ and the flags the replicas run with.
func (d *demo) readManifests() error {
	var err error
	if d.manifests, err = install.LoadKustomization(d.cfg.deployDir); err != nil {
		return err
	}
	containerArgs, err := install.ContainerArgs(d.manifests, statefulSetName, containerName)
	if err != nil {
		return err
	}
	d.podArgs = install.WithoutPodOnlyFlags(containerArgs)
	defaults := options.NewLeaderElectionOptions()
	d.leaseNS = flagOr(containerArgs, "leader-elect-resource-namespace", defaults.ResourceNamespace)
	d.leaseName = flagOr(containerArgs, "leader-elect-resource-name", defaults.ResourceName)
	d.timings = fmt.Sprintf("lease duration %s, renew deadline %s, retry period %s",
		flagOr(containerArgs, "leader-elect-lease-duration", defaults.LeaseDuration.String()),
		flagOr(containerArgs, "leader-elect-renew-deadline", defaults.RenewDeadline.String()),
		flagOr(containerArgs, "leader-elect-retry-period", defaults.RetryPeriod.String()))
	d.app, err = sample.Load(filepath.Join(d.cfg.deployDir, "sample"))
	return err
}

// install applies deploy/ and starts the replicas, each with a token of its own.
func (d *demo) install(ctx context.Context) error {
	applier, err := install.NewApplier(d.cp.RESTConfig(), fieldManager)
	if err != nil {
		return err
	}
	if _, err := applier.Apply(ctx, d.manifests, install.ApplyOptions{}); err != nil {
		return err
	}
	d.p.step("Applied %s with server-side apply: %d objects", d.cfg.deployDir, len(d.manifests))
	for _, m := range d.manifests {
		d.p.info("%s", m)
	}

	d.p.step("Starting %d replicas as the StatefulSet runs its pods: its container's flags, a token of ServiceAccount %s/%s",
		replicaCount, saNamespace, saName)
	d.p.info("election: Lease %s/%s, %s", d.leaseNS, d.leaseName, d.timings)
	for i := range replicaCount {
		r, err := d.newReplica(ctx, fmt.Sprintf("%s-%d", statefulSetName, i))
		if err != nil {
			return err
		}
		d.replicas = append(d.replicas, r)
	}
	// Each replica waits for the apiserver before it joins the election; start them
	// together so that all three compete for the first term.
	errs := make([]error, len(d.replicas))
	var starting sync.WaitGroup
	for i, r := range d.replicas {
		starting.Go(func() { errs[i] = d.startReplica(ctx, r) })
	}
	starting.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, r := range d.replicas {
		d.p.info("%-22s https://127.0.0.1:%d/metrics  identity %s  log %s", r, r.port, r.identity, r.logPath)
	}
	return nil
}

// newReplica prepares replica name: its ServiceAccount token, port and command line.
func (d *demo) newReplica(ctx context.Context, name string) (*replica, error) {
	// A pod gets a token of its own from the kubelet; so does each replica here.
	kubeconfig := filepath.Join(d.cp.Dir(), "kubeconfigs", name+"-serviceaccount.kubeconfig")
	if err := install.ServiceAccountKubeconfig(ctx, d.cp.Client(), d.cp.KubeconfigPath(),
		saNamespace, saName, kubeconfig, time.Hour); err != nil {
		return nil, err
	}
	credential, err := install.KubeconfigCredentialID(kubeconfig)
	if err != nil {
		return nil, err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	// Serving delegates authentication and authorization with the same token, as a pod
	// does with its in-cluster configuration.
	serving, err := d.cp.ServingFlags(name, port, kubeconfig)
	if err != nil {
		return nil, err
	}
	scraper, err := d.cp.ScrapeClient("demo-scraper")
	if err != nil {
		return nil, err
	}
	args := append(append([]string{"--kubeconfig=" + kubeconfig}, serving...), d.podArgs...)
	return &replica{name: name, port: port, scraper: scraper, args: args, binary: d.cfg.binary, logPath: d.cp.LogPath(name),
		credential: credential}, nil
}

// startReplica starts a replica and records its identity for the Lease watcher.
func (d *demo) startReplica(ctx context.Context, r *replica) error {
	identity, err := r.start(ctx)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r.identity = identity
	d.names[identity] = r.name
	return nil
}

// describe names the replica of a holder identity.
func (d *demo) describe(identity string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name, ok := d.names[identity]; ok {
		return name + " (" + identity + ")"
	}
	return identity
}

// replicaWith returns the running replica whose identity is identity, or nil.
func (d *demo) replicaWith(identity string) *replica {
	for _, r := range d.replicas {
		if r.identity == identity && !r.process.Exited() {
			return r
		}
	}
	return nil
}

// waitForLeader waits for a holder other than previous since a moment, and for its
// replica to say that it leads.
func (d *demo) waitForLeader(ctx context.Context, previous string, since time.Time) (*replica, holderChange, error) {
	change, err := d.lease.newHolder(ctx, previous, since, electionTimeout)
	if err != nil {
		return nil, change, err
	}
	r := d.replicaWith(change.to)
	if r == nil {
		return nil, change, fmt.Errorf("lease %s/%s is held by %q, which is no running replica", d.leaseNS, d.leaseName, change.to)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		leads, err := r.leads(ctx, d.leaseName)
		if err == nil && leads {
			return r, change, nil
		}
		if time.Now().After(deadline) {
			return nil, change, fmt.Errorf("%s holds the lease but its metrics do not say it leads (%v)", r, err)
		}
		select {
		case <-ctx.Done():
			return nil, change, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// showLeader prints and returns the output of `mini-kcm leader`, run as the admin.
func (d *demo) showLeader(ctx context.Context, when string) (string, error) {
	args := []string{"leader", "--kubeconfig=" + d.cp.KubeconfigPath(),
		"--leader-elect-resource-namespace=" + d.leaseNS, "--leader-elect-resource-name=" + d.leaseName}
	d.p.step("mini-kcm leader (%s)", when)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Only stdout: a race-detector build announces itself on stderr.
	cmd := exec.CommandContext(ctx, d.cfg.binary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	output, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("mini-kcm %s: %w\n%s%s", strings.Join(args, " "), err, output, stderr.String())
	}
	d.p.block(string(output))
	return string(output), nil
}

// deploySample applies deploy/sample/ and waits until it is rolled out.
func (d *demo) deploySample(ctx context.Context) error {
	applier, err := install.NewApplier(d.cp.RESTConfig(), fieldManager)
	if err != nil {
		return err
	}
	d.p.step("Sample app: %s with server-side apply", filepath.Join(d.cfg.deployDir, "sample"))
	begin := time.Now()
	if err := d.app.Apply(ctx, applier); err != nil {
		return err
	}
	state, err := d.app.WaitRolledOut(ctx, d.cp.Client(), *d.app.Deployment.Spec.Replicas, rolloutTimeout)
	if err != nil {
		return err
	}
	d.p.info("rolled out in %s: %s", seconds(time.Since(begin)), state)
	return nil
}

// failover stops the leader with sig, measures the takeover, proves the new leader
// reconciles by scaling the sample app to scaleTo, and starts the stopped replica again
// as the StatefulSet controller would recreate its pod.
func (d *demo) failover(ctx context.Context, leader *replica, sig syscall.Signal, scaleTo int32) (takeover, *replica, error) {
	t := takeover{signal: sig, from: leader.identity}
	logStart := logSize(leader.logPath)
	begin := time.Now()
	if err := leader.process.Signal(sig); err != nil {
		return t, nil, err
	}
	d.p.event(begin, "%s sent to %s", signalName(sig), leader)
	d.marks = append(d.marks, mark{at: begin, replica: leader.name, signal: signalName(sig)})

	code, err := leader.process.Wait(exitTimeout)
	if err != nil {
		return t, nil, err
	}
	t.exited, t.exitCode = time.Since(begin), code
	if sig == syscall.SIGTERM {
		t.released = logContains(leader.logPath, logStart, `"Released the lease"`)
		d.p.info("%s exited with code %d after %s; released the lease: %v", leader.name, code, seconds(t.exited), t.released)
	}

	next, change, err := d.waitForLeader(ctx, leader.identity, begin)
	if err != nil {
		return t, nil, err
	}
	t.to, t.took = next.identity, change.at.Sub(begin)
	d.p.info("%s took over %s after the %s", next.name, seconds(t.took), signalName(sig))

	d.p.info("the new leader reconciles: scaling the sample app to %d", scaleTo)
	scaled := time.Now()
	if err := d.app.Scale(ctx, d.cp.Client(), scaleTo); err != nil {
		return t, nil, err
	}
	state, err := d.app.WaitRolledOut(ctx, d.cp.Client(), scaleTo, rolloutTimeout)
	if err != nil {
		return t, nil, err
	}
	t.scaledTo, t.reconciled = scaleTo, time.Since(scaled)
	d.p.info("rolled out in %s: %s", seconds(t.reconciled), state)

	if err := d.startReplica(ctx, leader); err != nil {
		return t, nil, err
	}
	d.p.info("%s started again as a standby, identity %s (the StatefulSet controller recreates a deleted or failed pod)", leader, leader.identity)
	return t, next, nil
}

// freeze stops the leader with SIGSTOP right after the sample app was scaled to
// scaleTo, so that it freezes in the middle of the work; waits for another replica to
// take over and roll the app out; scales it to settle and waits for that too; then
// resumes the frozen leader with SIGCONT. Nothing it does after it resumes may land:
// it no longer holds the Lease. It must notice and exit with code 1, and is started
// again as the StatefulSet controller would.
func (d *demo) freeze(ctx context.Context, leader *replica, scaleTo, settle int32) (takeover, *replica, error) {
	t := takeover{signal: syscall.SIGSTOP, from: leader.identity}
	if err := d.app.Scale(ctx, d.cp.Client(), scaleTo); err != nil {
		return t, nil, err
	}
	// Long enough for the leader to see the change and start creating pods.
	time.Sleep(200 * time.Millisecond)
	begin := time.Now()
	if err := leader.process.Signal(syscall.SIGSTOP); err != nil {
		return t, nil, err
	}
	d.p.event(begin, "SIGSTOP sent to %s, in the middle of the scale-up to %d", leader, scaleTo)
	d.marks = append(d.marks, mark{at: begin, replica: leader.name, signal: "SIGSTOP"})
	resume := func() { _ = leader.process.Signal(syscall.SIGCONT) }
	next, change, err := d.waitForLeader(ctx, leader.identity, begin)
	if err != nil {
		resume()
		return t, nil, err
	}
	t.to, t.took = next.identity, change.at.Sub(begin)
	d.p.info("%s took over %s after the SIGSTOP", next.name, seconds(t.took))

	d.p.info("the new leader reconciles: the scale-up to %d, then a scale-down to %d", scaleTo, settle)
	scaled := time.Now()
	for _, n := range []int32{scaleTo, settle} {
		if n != scaleTo {
			if err := d.app.Scale(ctx, d.cp.Client(), n); err != nil {
				resume()
				return t, nil, err
			}
		}
		state, err := d.app.WaitRolledOut(ctx, d.cp.Client(), n, rolloutTimeout)
		if err != nil {
			resume()
			return t, nil, err
		}
		d.p.info("rolled out: %s", state)
	}
	t.scaledTo, t.reconciled = settle, time.Since(scaled)

	resumed := time.Now()
	if err := leader.process.Signal(syscall.SIGCONT); err != nil {
		return t, nil, err
	}
	d.p.event(resumed, "SIGCONT sent to %s: it resumes with the view it had when it froze", leader)
	d.marks = append(d.marks, mark{at: resumed, replica: leader.name, signal: "SIGCONT"})
	// The resumed leader finds the Lease in other hands at its next renewal, drains
	// behind its closed fence and stands by again, in the same process.
	deadline := resumed.Add(exitTimeout)
	for {
		if leader.process.Exited() {
			code, _ := leader.process.Wait(0)
			return t, nil, fmt.Errorf("%s exited with code %d after it resumed; a lost Lease must leave it a standby", leader.name, code)
		}
		data, err := readFrom(leader.logPath, 0)
		if err != nil {
			return t, nil, err
		}
		if strings.Contains(string(data), `"leaderelection lost"`) {
			break
		}
		if time.Now().After(deadline) {
			return t, nil, fmt.Errorf("%s did not step down within %s after it resumed", leader.name, exitTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.exited, t.exitCode = time.Since(resumed), 0
	t.steppedDown = true
	d.p.info("%s stepped down %s after it resumed and stands by again, identity %s (no restart)", leader.name, seconds(t.exited), leader.identity)
	return t, next, nil
}

// stopAll stops the replicas at once (stopping the leader first would only hand the
// Lease to a standby about to stop too), then the control plane. It returns the
// replicas whose logs report a data race, read before the logs are removed.
func (d *demo) stopAll() (dataRaces []string) {
	var stopping sync.WaitGroup
	for _, r := range d.replicas {
		if r.process != nil {
			stopping.Go(func() { r.process.Stop(15 * time.Second) })
		}
	}
	stopping.Wait()
	for _, r := range d.replicas {
		if logContains(r.logPath, 0, "WARNING: DATA RACE") {
			dataRaces = append(dataRaces, r.name+" ("+r.logPath+")")
		}
	}
	if err := d.cp.Stop(); err != nil {
		d.p.info("stopping the control plane: %v", err)
	}
	return dataRaces
}

// grepLogs returns the lines of every replica's log that contain word, ignoring case.
func (d *demo) grepLogs(word string) []string {
	var found []string
	for _, r := range d.replicas {
		data, err := readFrom(r.logPath, 0)
		if err != nil {
			found = append(found, fmt.Sprintf("%s: %v", r.name, err))
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(strings.ToLower(line), strings.ToLower(word)) {
				found = append(found, r.name+": "+line)
			}
		}
	}
	return found
}

// printLogTails prints the end of every replica's log, before Stop removes them.
func (d *demo) printLogTails() {
	for _, r := range d.replicas {
		d.p.step("Last 30 lines of %s", r.logPath)
		d.p.block(controlplane.Tail(r.logPath, 30))
	}
}

// signalName names the two signals the demo sends as a reader knows them.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	default:
		return sig.String()
	}
}

// flagOr returns the value of --name in args, or def.
func flagOr(args []string, name, def string) string {
	if v, ok := install.FlagValue(args, name); ok {
		return v
	}
	return def
}

// logContains reports whether the log holds s past offset; an unreadable log holds
// nothing.
func logContains(path string, offset int64, s string) bool {
	data, err := readFrom(path, offset)
	return err == nil && strings.Contains(string(data), s)
}
