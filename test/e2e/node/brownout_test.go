package node

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The ha suite's brownout on the real node: deploy/ as shipped (three replicas at the
// default timings, probed by the kubelet) while kube-apiserver is frozen for 3s every
// 10s, four times, with a scale-up between two stalls, then for 30s right after
// another scale-up. Every replica and the kubelet lose the apiserver together: the
// leader pauses behind its fence and resumes, the standbys do not count the stalls,
// the probes (/livez does not depend on the apiserver) keep passing, so the Lease
// never changes hands and the kubelet restarts nothing; the sample converges after.
func TestABrownoutOfTheAPIServerRestartsNoReplicaOnTheKubelet(t *testing.T) {
	importImages(t)
	cp := framework.ControlPlane(t)
	ctx := t.Context()
	installDeploy(t, "deploy")
	pods := waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, 3*time.Minute)
	installSample(t)
	waitSampleRolledOut(t, 3)

	restarts := map[string]int32{}
	for _, p := range pods {
		restarts[p.Name] = restartCount(t, p.Name)
	}
	before, err := cp.Client().CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leader := holderPod(ptr.Deref(before.Spec.HolderIdentity, ""))

	apiserver := cp.Pid(controlplane.KubeAPIServer)
	if apiserver == 0 {
		t.Fatal("kube-apiserver is not running")
	}
	// Never leave the suite's apiserver frozen.
	t.Cleanup(func() { _ = syscall.Kill(apiserver, syscall.SIGCONT) })
	freeze := func(d time.Duration) {
		t.Helper()
		signal(t, apiserver, syscall.SIGSTOP)
		time.Sleep(d)
		signal(t, apiserver, syscall.SIGCONT)
	}
	start := time.Now()
	for i := range 4 {
		freeze(3 * time.Second)
		if i == 1 {
			kubectl(t, "scale", "-n", sampleNS, "deployment/sample", "--replicas=4")
		}
		time.Sleep(7 * time.Second)
	}
	kubectl(t, "scale", "-n", sampleNS, "deployment/sample", "--replicas=5")
	freeze(30 * time.Second)
	t.Logf("four 3s stalls and one of 30s over %s", time.Since(start).Round(time.Second))
	waitSampleRolledOut(t, 5)
	// The kubelet's probes run every 10s and restart after 3 failures: give them a
	// full round after the last stall before counting.
	time.Sleep(10 * time.Second)
	waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, time.Minute)

	after, err := cp.Client().CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changes := ptr.Deref(after.Spec.LeaseTransitions, 0) - ptr.Deref(before.Spec.LeaseTransitions, 0)
	total := int32(0)
	for _, p := range pods {
		n := restartCount(t, p.Name) - restarts[p.Name]
		total += n
		if n != 0 {
			t.Errorf("the kubelet restarted %s %d times during the brownout; want none", p.Name, n)
		}
	}
	pauses, resumes := leaderLogCount(t, leader, "Paused leading"), leaderLogCount(t, leader, "Resumed leading")
	t.Logf("NODE-NUMBERS brownout: leader-changes=%d restarts=%d holder-before=%s holder-after=%s leader pauses=%d resumes=%d",
		changes, total, leader, holderPod(ptr.Deref(after.Spec.HolderIdentity, "")), pauses, resumes)
	if changes != 0 || ptr.Deref(after.Spec.HolderIdentity, "") != ptr.Deref(before.Spec.HolderIdentity, "") {
		t.Errorf("the Lease changed hands %d times (holder %s before, %s after); want no leader change in a brownout every replica shared",
			changes, ptr.Deref(before.Spec.HolderIdentity, ""), ptr.Deref(after.Spec.HolderIdentity, ""))
	}
	if pauses < 1 || pauses != resumes {
		t.Errorf("the leader %s logged %d pauses and %d resumes; want at least one (the 30s stall is past the renew deadline) and each resumed",
			leader, pauses, resumes)
	}
}

// leaderLogCount counts the lines of pod's mini-kcm container logs (all its
// containers', as the kubelet keeps them on the node) that contain s.
func leaderLogCount(t *testing.T, pod, s string) int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(framework.ControlPlane(t).NodeDir(), "pod-logs", leaseNamespace+"_"+pod+"_*", "mini-kcm", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no container log of %s on the node (%v)", pod, err)
	}
	n := 0
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(data), s)
	}
	return n
}
