// Package handover proves that a mini-kcm leader notices when kube-controller-manager
// still runs one of its controllers (the fight the hand-over must avoid), and that
// `mini-kcm handover check` says who runs what, with the real kube-controller-manager
// v1.37.2 beside mini-kcm.
package handover

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one control plane without nodes: the controllers' writes to
// ReplicaSets (pods created, status) are all these tests look at, and pending pods
// count for a ReplicaSet's status as well as running ones.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{}))
}
