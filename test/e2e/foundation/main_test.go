// Package foundation proves what every later feature stands on: replicas elect exactly
// one leader, hand over quickly when the leader dies or is stopped, reject bad
// configuration with a clear message, and expose health and metrics.
package foundation

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts one apiserver-only control plane for the package: no test here needs
// a pod to run.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{}))
}
