// Package replicaset proves the ReplicaSet controller against a real apiserver, a real
// scheduler and KWOK (which makes pods Running and Ready with an IP, and finishes their
// deletion as a kubelet would), with mini-kcm running only that controller.
//
// Each test starts its own mini-kcm replica (--controllers=replicaset) in its own
// namespace and reads like the story it proves: a user creates or changes a ReplicaSet
// or its pods, and the test checks the objects, status, conditions and events that
// kube-controller-manager v1.37.2 would produce, plus the requests mini-kcm made, from
// the apiserver's audit log. Where a case rests on a subtle upstream rule, the test
// names the upstream function it follows (pkg/controller/replicaset/replica_set.go and
// pkg/controller/controller_utils.go unless said otherwise).
//
// MINI_KCM_E2E_UPSTREAM=1 (framework.UpstreamEnv) runs the same tests against kube-controller-manager v1.37.2
// (--controllers=replicaset) instead of mini-kcm, which checks that every expectation
// here is upstream's behaviour. Each test logs the controller's requests by verb,
// resource and response code, so that the two runs can be compared side by side.
package replicaset

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one control plane for the package with a scheduler and two KWOK
// nodes, so that the pods the controller creates get bound, become Ready and go away
// when deleted.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{Scheduler: true, KWOK: true, Nodes: 2}))
}
