// Package deployment proves, against a real kube-apiserver, kube-scheduler and KWOK
// nodes, that mini-kcm's Deployment controller rolls Deployments out the way
// kube-controller-manager v1.37.2 does: the ReplicaSets it creates and how it names,
// labels and annotates them, the rollout arithmetic (surge, unavailability,
// proportional scaling), Recreate, pause and resume, rollback, history cleanup,
// progress deadlines, hash collisions, and the conditions and events users see.
//
// Every test starts one mini-kcm replica running only the ReplicaSet and Deployment
// controllers (the ReplicaSet controller makes the pods; KWOK makes them Ready). With
// MINI_KCM_E2E_UPSTREAM=1 (framework.UpstreamEnv) the same tests run against the real
// kube-controller-manager from the control plane's binary directory instead, which is
// how the expectations here were checked against upstream.
package deployment

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one control plane for the package. Pods need a scheduler and a
// kubelet to become Ready; two fake nodes are plenty, as KWOK pods cost nothing.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{Scheduler: true, KWOK: true, Nodes: 2}))
}
