package sharding

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/app"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestTheApiserverRefusesAFrozenShardHoldersWritesWhenItsInProcessFenceIsOff proves
// the apiserver's half of the sharded fence alone (deploy/sharded/fence/): three
// replicas run with --shards=3 and --leader-elect-apiserver-fence, against the sharded
// fence policy bound to each of the test's shard Leases, and with the in-process fence
// turned off by the test-only NoInProcessFenceEnv. A replica started before the
// bindings exist refuses to start and names them. The holder of one tenant's shard is
// frozen (SIGSTOP) in the middle of creating that tenant's pods; the others take the
// shard over and finish; when it resumes, the writes of its stale term reach the
// apiserver (nothing in the process stops them) and every one of them is refused by
// the policy, as the audit log shows. Every tenant ends with exactly its pods. Dry runs
// then show the policy's other cases: no shard Lease named is refused, the current
// holder is admitted, a Lease no binding takes passes (the start check covers that).
//
// Other timings, and why: --kube-api-qps=10 and --kube-api-burst=10 make a scale-up
// to 100 pods take about 9s, so that the test can freeze the holder in the middle of
// it; --shard-rebalance-threshold=10 keeps the coordinator from recutting while one
// tenant grows to 100 pods, so that the story has one takeover, not a recut too.
func TestTheApiserverRefusesAFrozenShardHoldersWritesWhenItsInProcessFenceIsOff(t *testing.T) {
	const (
		shardsHere = 3
		scaledTo   = 100
	)
	f := framework.New(t)
	ctx := f.Context()
	tenants := createTenants(t, f, 6, 2)
	// This control plane runs no namespace controller: a deleted tenant keeps its pods,
	// and the coordinators of the tests that follow would weigh them. Delete them once
	// the replicas are gone (cleanups run in reverse).
	t.Cleanup(func() {
		for _, ns := range tenants {
			_ = f.Client.AppsV1().ReplicaSets(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
			_ = f.Client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	})
	opts := shardedArgs(shardsHere, "--leader-elect-apiserver-fence=true", "--kube-api-qps=10", "--kube-api-burst=10",
		"--shard-rebalance-threshold=10")
	opts.Env = []string{app.NoInProcessFenceEnv + "=true"}

	// The policy, as deploy/sharded/fence/ ships it but for the suite's replicas' users.
	shipped, err := controlplane.ShardFencePolicy("")
	if err != nil {
		t.Fatal(err)
	}
	identities, err := framework.SuiteFenceIdentities(shipped)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := controlplane.ShardFencePolicy(identities)
	if err != nil {
		t.Fatal(err)
	}
	if err := controlplane.InstallFencePolicy(ctx, f.Client, policy); err != nil {
		t.Fatal(err)
	}

	// Without the bindings, a replica with the flag does not start, and says why.
	early := f.StartReplica(opts)
	if code, err := early.Wait(time.Minute); err != nil || code == 0 {
		t.Fatalf("a replica started before the shard fence's bindings: exit code %d, %v; want it to fail at start", code, err)
	}
	for _, want := range []string{"has no binding", leaderelection.ShardFencePolicyName, "make generate",
		fmt.Sprintf("%s/%s-0, %s/%s-1, %s/%s-2", f.LeaseNamespace, f.LeaseName, f.LeaseNamespace, f.LeaseName, f.LeaseNamespace, f.LeaseName)} {
		if !strings.Contains(early.Logs(), want) {
			t.Errorf("the replica started without bindings does not log %q:\n%s", want, early.Logs())
		}
	}

	bindings, err := controlplane.ShardFenceBindings("shard-fence-"+f.Namespace, f.LeaseNamespace, f.LeaseName, shardsHere, tenants)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bindings {
		if err := controlplane.InstallFenceBinding(ctx, f.Client, b); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = f.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		})
	}

	replicas := f.StartReplicas(3, opts)
	waitForPods(t, f, tenants, 2)
	waitForFairSharesOf(t, f, replicas, shardsHere)
	for _, r := range replicas {
		logs := r.Logs()
		if !strings.Contains(logs, "ValidatingAdmissionPolicy "+leaderelection.ShardFencePolicyName) || !strings.Contains(logs, "IN-PROCESS FENCE OFF") {
			t.Fatalf("%s does not log both its fence layers and the in-process one off:\n%s", r.Name, logs)
		}
	}

	epoch := activeEpoch(t, f)
	shard := epoch.Plan.Shard(tenants[0])
	lease := fmt.Sprintf("%s-%d", f.LeaseName, shard)
	frozen := holderOf(t, f, replicas, shard)
	staleHolder := ptr.Deref(shardLeases(t, f)[shard].Spec.HolderIdentity, "")

	// Freeze the holder while it creates the tenant's pods.
	scaleReplicaSet(t, f, tenants[0], scaledTo)
	framework.EventuallyEvery(t, time.Minute, 20*time.Millisecond, func() error {
		pods, err := f.Client.CoreV1().Pods(tenants[0]).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n >= scaledTo {
			t.Fatalf("%s created all %d pods before the test could freeze it", frozen.Name, n)
		} else if n < 20 {
			return fmt.Errorf("%d pods of %d", n, scaledTo)
		}
		return nil
	})
	if err := syscall.Kill(frozen.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	t.Logf("froze %s (holder %s of %s, shard of %s)", frozen.Name, staleHolder, lease, tenants[0])

	// Another replica takes the shard over and finishes the tenant's pods.
	framework.Eventually(t, time.Minute, func() error {
		h := ptr.Deref(shardLeases(t, f)[shard].Spec.HolderIdentity, "")
		if h == "" || h == staleHolder {
			return fmt.Errorf("%s is held by %q", lease, h)
		}
		return nil
	})
	t.Logf("frozen → %s taken over: %s", lease, time.Since(frozenAt).Round(10*time.Millisecond))
	waitForPods(t, f, tenants[:1], scaledTo)

	if err := syscall.Kill(frozen.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	waitForFairSharesOf(t, f, replicas, shardsHere)
	if frozen.Exited() {
		t.Fatalf("the resumed replica exited; want it to drop only its lost shards:\n%s", frozen.Logs())
	}
	waitForPods(t, f, tenants[:1], scaledTo)
	waitForPods(t, f, tenants[1:], 2)

	// From the audit log: the frozen term's writes to the tenant after it resumed.
	events, err := framework.AuditLog(f.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	isWrite := func(e *controlplane.AuditEvent) bool {
		return e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Namespace == tenants[0] &&
			e.ObjectRef.Resource != "events" && e.By == frozen.Name &&
			(e.Verb == "create" || e.Verb == "update" || e.Verb == "patch" || e.Verb == "delete")
	}
	staleTerm := ""
	for _, e := range events {
		if isWrite(&e) && e.ObjectRef.Resource == "pods" && e.Code() == 201 && e.RequestReceivedTimestamp.Before(frozenAt) {
			_, term, _ := strings.Cut(e.UserAgent, "; shard ")
			staleTerm = "; shard " + term
		}
	}
	if staleTerm == "" {
		t.Fatalf("no pod of %s created by %s before it was frozen", tenants[0], frozen.Name)
	}
	messages := auditMessages(t, f.ControlPlane.AuditLogPath())
	refused, conflicts, canceled, admitted := 0, 0, 0, 0
	for _, e := range events {
		if !isWrite(&e) || !strings.Contains(e.UserAgent, staleTerm) || e.RequestReceivedTimestamp.Before(resumed) {
			continue
		}
		message := messages[e.AuditID]
		if e.Code() == 409 {
			// An update with a stale resourceVersion fails before admission: not
			// applied either, and never seen by the policy.
			conflicts++
			continue
		}
		if canceledByTheClient(e.Code(), message) {
			// The replica gave up on the request (its term ended under it) before the
			// apiserver answered; whether admission saw it or not, the pod counts below
			// show that nothing of it was applied twice.
			canceled++
			continue
		}
		if e.Code() == 403 && strings.Contains(message, "ValidatingAdmissionPolicy '"+leaderelection.ShardFencePolicyName+"'") &&
			strings.Contains(message, "write fenced by the apiserver") &&
			strings.Contains(message, "writes as holder "+staleHolder+" of shard lease "+f.LeaseNamespace+"/"+lease) {
			refused++
			if refused == 1 {
				t.Logf("first refusal, %s after the resume: %s %s → %d %q", e.RequestReceivedTimestamp.Sub(resumed).Round(time.Millisecond),
					e.Verb, e.RequestURI, e.Code(), message)
			}
			continue
		}
		admitted++
		t.Errorf("a write of the frozen term after it resumed was not refused by the shard fence: %s %s → %d %q (%s)",
			e.Verb, e.RequestURI, e.Code(), message, e.UserAgent)
	}
	t.Logf("writes of %s's frozen term (%s) after it resumed: %d refused by %s, %d conflicts (stale resourceVersion), %d canceled by the replica, %d other",
		frozen.Name, strings.TrimPrefix(strings.TrimSuffix(staleTerm, ")"), "; "), refused, leaderelection.ShardFencePolicyName, conflicts, canceled, admitted)
	switch {
	case refused > 0:
	case canceled > 0:
		// The resumed replica saw its Lease in other hands and ended the term, which
		// canceled its writes before the loaded apiserver answered them. A stale
		// holder's refusal is then shown by the dry run below.
		t.Logf("every write of the frozen term after it resumed was canceled by the replica before the apiserver answered; " +
			"the dry run of another holder below shows the refusal")
	default:
		t.Errorf("the frozen term sent no write after it resumed; the test proves nothing (the in-process fence is off: want it to try)")
	}
	assertOneWriterAtATime(t, f, tenants)

	// The policy's other cases, as a dry run (admission runs, nothing is stored) by a
	// user of the replicas' group (in system:masters, as theirs): one of another
	// holder and one that names no shard Lease are refused, one that names the shard
	// with its current holder is admitted, and the shard's binding ignores a write
	// naming another Lease.
	current := ptr.Deref(shardLeases(t, f)[shard].Spec.HolderIdentity, "")
	dryRunAs := func(extra map[string][]string) error {
		cfg := f.ControlPlane.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "shard-fence-probe", Groups: []string{"system:masters", framework.ReplicaGroup}, Extra: extra}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		_, err = client.CoreV1().Pods(tenants[0]).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	shardLease := f.LeaseNamespace + "/" + lease
	// The frozen replica may have won the shard back since; another name is a former
	// holder for sure.
	former := "former-holder-of-" + lease
	if err := dryRunAs(map[string][]string{leaderelection.LeaseHolderExtra: {former}, leaderelection.ShardLeaseExtra: {shardLease}}); err == nil ||
		!strings.Contains(err.Error(), "writes as holder "+former+" of shard lease "+shardLease) {
		t.Errorf("a write of a holder other than the shard's (%s): %v, want refused by the policy, naming the holder and the Lease", current, err)
	}
	if err := dryRunAs(map[string][]string{leaderelection.LeaseHolderExtra: {current}}); err == nil ||
		!strings.Contains(err.Error(), "sends no "+leaderelection.ShardLeaseExtra+" extra") {
		t.Errorf("a write with the holder but no shard Lease: %v, want refused by the policy, saying the extra is missing", err)
	}
	if err := dryRunAs(map[string][]string{leaderelection.LeaseHolderExtra: {current}, leaderelection.ShardLeaseExtra: {shardLease}}); err != nil {
		t.Errorf("a write of the shard's current holder %s: %v, want admitted", current, err)
	}
	if err := dryRunAs(map[string][]string{leaderelection.LeaseHolderExtra: {staleHolder},
		leaderelection.ShardLeaseExtra: {f.LeaseNamespace + "/" + f.LeaseName + "-not-bound"}}); err != nil {
		t.Errorf("a write naming a Lease no binding takes: %v, want admitted (the start check makes sure every shard is bound)", err)
	}
}

// auditMessages returns, by audit ID, the message of each failed request in the audit
// log at path: the apiserver's answer, which for an admission policy's denial names the
// policy, the binding and the policy's message. (controlplane.AuditEvent keeps the code
// only.)
func auditMessages(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	messages := map[string]string{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e struct {
			AuditID        string `json:"auditID"`
			ResponseStatus *struct {
				Message string `json:"message"`
			} `json:"responseStatus"`
		}
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &e) != nil || e.ResponseStatus == nil || e.ResponseStatus.Message == "" {
			continue
		}
		messages[e.AuditID] = e.ResponseStatus.Message
	}
	return messages
}

// canceledByTheClient tells whether the apiserver answered a request with the error it
// records when the client gave up on it: its handler's context canceled while it waited
// for storage (504 "context canceled"), or the HTTP/2 stream reset by the client while
// the apiserver still read the request's body (500 "stream error: stream ID N; CANCEL"),
// in which case nothing of the body was decoded, let alone stored.
func canceledByTheClient(code int32, message string) bool {
	switch code {
	case 504:
		return strings.Contains(message, "context canceled")
	case 500:
		return strings.HasPrefix(message, "stream error: stream ID ") && strings.HasSuffix(message, "; CANCEL")
	}
	return false
}
