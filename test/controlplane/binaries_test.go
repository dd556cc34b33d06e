package controlplane

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// `make test` runs `make control-plane` and nothing else to get its binaries, so the
// build script must build every binary that the harness, the e2e suites or the
// benchmarks launch. kube-controller-manager was once built only for `make bench`, and
// an e2e suite that runs it failed on an empty cache.
func TestBuildScriptBuildsEveryBinaryTheTestsLaunch(t *testing.T) {
	out, err := exec.Command("../../hack/build-control-plane.sh", "--list").Output()
	if err != nil {
		t.Fatalf("hack/build-control-plane.sh --list: %v", err)
	}
	built := strings.Fields(string(out))
	for _, name := range Binaries {
		if !slices.Contains(built, name) {
			t.Errorf("hack/build-control-plane.sh does not build %s, which the tests launch; it builds %v", name, built)
		}
	}
}

func TestBinaryNamesTheMissingBinaryAndTheFix(t *testing.T) {
	t.Setenv("MINI_KCM_BIN_DIR", t.TempDir())
	_, err := Binary(KubeControllerManager)
	if err == nil || !strings.Contains(err.Error(), "kube-controller-manager") || !strings.Contains(err.Error(), "make control-plane") {
		t.Fatalf("err = %v, want it to name kube-controller-manager and `make control-plane`", err)
	}
}
