// Package endpoints proves the Endpoints controller against a real kube-apiserver, with
// pods that run on KWOK's fake nodes: which pods a Service's Endpoints list and how,
// which objects the controller leaves alone, and how often it writes. Each test starts
// its own mini-kcm (--controllers=endpoints) and compares the Endpoints it sees with what
// kube-controller-manager v1.37 writes for the same objects; comments cite the upstream
// rule wherever a case is subtle.
//
// How pod state is driven. The pods name their node themselves (spec.nodeName), so the
// suite needs no scheduler and every address has a known nodeName. KWOK's pod-ready
// stage (test/controlplane/kwok.go) then marks a pod Running with a pod IP and sets its
// Ready condition, and every readiness gate, to True in one write; readiness gates
// therefore cannot hold a pod back here. That stage only matches Pending pods, so once a
// pod runs its status belongs to the test, which flips readiness and phase through the
// pods/status subresource, as the kubelet would. KWOK removes a deleted pod at once
// unless it has a finalizer, which is how the tests keep a pod terminating.
package endpoints

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one control plane for the package: etcd, kube-apiserver and KWOK with
// two fake nodes, so that addresses spread over more than one node.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{KWOK: true, Nodes: 2}))
}
