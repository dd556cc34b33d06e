package replicaset

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// Pods that are being deleted but are not gone yet (a finalizer holds them) no longer
// count as replicas: the controller replaces them at once and reports them in
// status.terminatingReplicas (DeploymentReplicaSetTerminatingReplicas, on by default)
// until they are gone. At no moment are more pods active than the ReplicaSet asks for.
func TestTerminatingPodsAreReplacedAndReportedUntilTheyAreGone(t *testing.T) {
	e := startEnv(t)
	census := e.watchPods("app=web")
	rs := newReplicaSet("web", 3)
	rs.Spec.Template.Finalizers = []string{holdFinalizer}
	rs = e.createReplicaSet(rs)
	e.waitForStatus("web", settled(3))
	pods := podNames(e.activePodsOf(rs))

	t.Logf("delete pod %s, which its finalizer keeps", pods[0])
	e.deletePod(pods[0])
	e.waitForStatus("web", counts{Replicas: 3, FullyLabeled: 3, Ready: 3, Available: 3, Terminating: 1})
	if active := podNames(e.activePodsOf(rs)); sets.New(active...).Has(pods[0]) {
		t.Fatalf("the terminating pod %s still counts as active: %v", pods[0], active)
	}

	t.Log("scale down to 2: the pod the controller deletes terminates too")
	e.scale("web", 2)
	e.waitForStatus("web", counts{Replicas: 2, FullyLabeled: 2, Ready: 2, Available: 2, Terminating: 2})

	t.Log("the finalizers go: the pods disappear and so does the count")
	for _, pod := range e.pods() {
		if pod.DeletionTimestamp != nil {
			e.removeFinalizers(pod.Name)
		}
	}
	e.waitForStatus("web", settled(2))

	if err := census.Err(); err != nil {
		t.Fatal(err)
	}
	if maxActive, at := census.MaxActive(); maxActive > 3 {
		t.Errorf("%d pods were active at once (first at %s), want at most 3", maxActive, at)
	}
	if seen := census.Seen(); len(seen) != 4 {
		t.Errorf("%d pods existed over the test, want 3 + 1 replacement: %v", len(seen), seen)
	}
}

// A pod bound to a node that no kubelet serves stays terminating after its deletion,
// as on a node that went away (upstream's TestTerminatingReplicas uses the same
// setup). Such pods are never ready, count as replicas until deleted, and then as
// terminating replicas only.
func TestPodsOnAnUnservedNodeStayTerminatingAndAreCounted(t *testing.T) {
	e := startEnv(t)
	rs := newReplicaSet("stuck", 3)
	rs.Spec.Template.Spec.NodeName = "node-without-kubelet"
	rs = e.createReplicaSet(rs)
	e.waitForStatus("stuck", counts{Replicas: 3, FullyLabeled: 3, Ready: 0, Available: 0, Terminating: 0})
	pods := podNames(e.activePodsOf(rs))

	e.deletePod(pods[0])
	e.deletePod(pods[1])
	e.waitForStatus("stuck", counts{Replicas: 3, FullyLabeled: 3, Ready: 0, Available: 0, Terminating: 2})
	if got := len(e.pods()); got != 5 {
		t.Errorf("%d pods exist, want 3 active + 2 terminating", got)
	}
}
