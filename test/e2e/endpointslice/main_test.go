// Package endpointslice proves the EndpointSlice controller against a real
// kube-apiserver, with pods that run on KWOK's fake nodes: which slices a Service gets,
// what their endpoints say (addresses, ports, conditions, node and zone), how they
// split, when they go away, and that mini-kcm and kube-controller-manager v1.37 take
// over each other's slices without writing a single one (read from the apiserver's
// audit log).
//
// Each test starts its own controller in its own namespace: a mini-kcm replica running
// only this controller (--controllers=endpointslice), or, with MINI_KCM_E2E_UPSTREAM=1
// (framework.UpstreamEnv), kube-controller-manager v1.37.2 with only its endpointslice
// controller, which checks that every expectation here is upstream's behaviour.
//
// How pod state is driven: pods name their node themselves (spec.nodeName), so the
// suite needs no scheduler; KWOK marks them Running and Ready with a pod IP, and the
// tests then flip readiness through pods/status as a kubelet would. A finalizer keeps a
// deleted pod terminating.
package endpointslice

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one control plane for the package: etcd, kube-apiserver and KWOK with
// two fake nodes, so that endpoints spread over two nodes (and, once labelled, zones).
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{KWOK: true, Nodes: 2}))
}
