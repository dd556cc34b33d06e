package replicaset

import (
	"fmt"
	"sync/atomic"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// upstreamCounter numbers upstream controller managers across the suite, so that
// users and log files never repeat.
var upstreamCounter atomic.Int64

// startUpstreamController runs kube-controller-manager with only the ReplicaSet
// controller, as its own user.
func (e *env) startUpstreamController() {
	e.t.Helper()
	name := fmt.Sprintf("kube-controller-manager-%d", upstreamCounter.Add(1))
	p := framework.StartKubeControllerManager(e.t, e.f.ControlPlane, name, "replicaset")
	e.controllerUser = name
	e.stopController = p.Kill
}
