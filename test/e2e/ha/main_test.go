// Package ha proves that mini-kcm is reliable where a controller manager is most often
// hurt: its leader dies or is stopped in the middle of a large scale-up, a network
// partition cuts the leader off from the apiserver, its watch connections go half-open
// behind a load balancer, the apiserver restarts, RBAC denies part of what it needs,
// the apiserver is unreachable or the kubeconfig is broken at start, and users create
// hostile or odd objects. In each case nothing is lost, nothing is duplicated, no two
// replicas act at once, and nothing crashes or spins.
//
// Tests here stay within a few minutes in total (make test). Longer soaks (2000 pods,
// upstream's election timings, a Service over 5000 pods) build with the "long" tag
// (make test-long).
//
// Takeover times are logged with the prefix "HA-TAKEOVER" and resource numbers with
// "HA-NUMBERS", so that they can be collected with grep from `go test -v` output.
package ha

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one control plane with pods that run (scheduler and KWOK) on eight
// fake nodes, so that scale-ups spread and Endpoints get real pod IPs.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{Scheduler: true, KWOK: true, Nodes: 8}))
}
