package replicaset

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// againstUpstream runs the suite against kube-controller-manager v1.37.2 instead of
// mini-kcm (MINI_KCM_E2E_UPSTREAM=1). It checks the tests rather than the product:
// every expectation in this package is meant to be upstream's behaviour, so the suite
// must pass against upstream too.
var againstUpstream = os.Getenv("MINI_KCM_E2E_UPSTREAM") == "1"

// upstreamCounter numbers upstream controller managers across the suite, so that
// users and log files never repeat.
var upstreamCounter atomic.Int64

// startUpstreamController runs kube-controller-manager with only the ReplicaSet
// controller, as its own user, without leader election or serving (nothing else
// competes for the test's namespace, and the tests read only the API).
func (e *env) startUpstreamController() {
	e.t.Helper()
	cp := e.f.ControlPlane
	name := fmt.Sprintf("kube-controller-manager-%d", upstreamCounter.Add(1))
	kubeconfig, err := cp.AddUser(name, "system:masters")
	if err != nil {
		e.t.Fatal(err)
	}
	logPath := filepath.Join(cp.Dir(), "logs", name+".log")
	kcmPath, err := controlplane.Binary(controlplane.KubeControllerManager)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name: name,
		Path: kcmPath,
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=replicaset",
			"--leader-elect=false",
			"--secure-port=0",
			"--v=2",
		},
		LogPath: logPath,
	})
	if err != nil {
		e.t.Fatalf("starting %s: %v", name, err)
	}
	e.controllerUser = name
	e.stopController = func() {
		p.Kill()
		if e.t.Failed() {
			e.t.Logf("---- last 80 lines of %s ----\n%s", logPath, controlplane.Tail(logPath, 80))
		}
	}
}
