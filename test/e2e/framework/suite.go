// Package framework runs mini-kcm replicas as real processes against the local control
// plane (test/controlplane) and gives e2e tests what they need to read like the user
// story they prove:
//
//	func TestMain(m *testing.M) {
//		os.Exit(framework.Run(m, controlplane.Options{Scheduler: true, KWOK: true, Nodes: 2}))
//	}
//
//	func TestStandbyTakesOverWhenLeaderIsKilled(t *testing.T) {
//		f := framework.New(t)
//		replicas := f.StartReplicas(3, framework.ReplicaOptions{})
//		leader := f.WaitForLeader(30 * time.Second)
//		...
//	}
//
// One control plane serves the whole test binary (it takes seconds to start); each test
// gets its own namespace and its own leader election Lease, so tests do not see each
// other's replicas. Tests in one package run one after the other (the default; do not
// use t.Parallel with replicas, which all watch the whole cluster).
//
// The mini-kcm binary is built once per test binary from ./cmd/mini-kcm, or taken from
// $MINI_KCM_BINARY when set; MINI_KCM_E2E_RACE=1 builds it with the race detector.
// MINI_KCM_KEEP_DIR=1 keeps the control plane directory and the replica logs.
package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// suite is the state shared by every test of one test binary. It is set once by Run
// before any test starts and read-only afterwards.
var suite struct {
	controlPlane *controlplane.ControlPlane
	// workDir holds the built binary and files that outlive a single test.
	workDir string

	buildOnce sync.Once
	binary    string
	buildErr  error
	// The binary without the race detector (MiniKCMBinaryWithoutRace).
	plainOnce   sync.Once
	plainBinary string
	plainErr    error

	// live tracks running replicas so that an interrupted run can stop them.
	live sync.Map // *Replica -> struct{}

	// fenceOnce installs the suite's fence policy (see fence.go) before the first
	// replica that fences at the apiserver starts.
	fenceOnce sync.Once
	fenceErr  error
}

// Run starts the control plane, runs the tests and stops everything; TestMain calls it
// and passes its result to os.Exit. Options.Logf defaults to printing progress on
// stderr.
func Run(m *testing.M, opts controlplane.Options) int {
	if opts.Logf == nil {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		}
	}
	var err error
	if suite.workDir, err = os.MkdirTemp("", "mini-kcm-e2e-"); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: creating work directory: %v\n", err)
		return 1
	}
	removeWorkDir := func() {
		if os.Getenv("MINI_KCM_KEEP_DIR") == "1" {
			fmt.Fprintf(os.Stderr, "e2e: keeping replica logs in %s\n", suite.workDir)
			return
		}
		os.RemoveAll(suite.workDir)
	}

	begin := time.Now()
	cp, err := controlplane.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the control plane: %v\n", err)
		removeWorkDir()
		return 1
	}
	suite.controlPlane = cp
	opts.Logf("control plane for the suite started in %v", time.Since(begin).Round(10*time.Millisecond))

	stopAll := func() {
		suite.live.Range(func(r, _ any) bool {
			r.(*Replica).Kill()
			return true
		})
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping the control plane: %v\n", err)
		}
		removeWorkDir()
	}
	cancelSignals := controlplane.StopOnSignal(stopAll)
	code := m.Run()
	cancelSignals()
	stopAll()
	return code
}

// ControlPlane returns the suite's control plane.
func ControlPlane(tb testing.TB) *controlplane.ControlPlane {
	tb.Helper()
	if suite.controlPlane == nil {
		tb.Fatal("no control plane: call framework.Run from TestMain")
	}
	return suite.controlPlane
}

// MiniKCMBinary returns the path of the mini-kcm binary, building it on first use.
func MiniKCMBinary(tb testing.TB) string {
	tb.Helper()
	suite.buildOnce.Do(func() {
		if path := os.Getenv("MINI_KCM_BINARY"); path != "" {
			suite.binary, suite.buildErr = fromModuleRoot(path)
			return
		}
		suite.binary, suite.buildErr = buildMiniKCM(tb, os.Getenv("MINI_KCM_E2E_RACE") == "1", "")
	})
	if suite.buildErr != nil {
		tb.Fatalf("mini-kcm binary: %v", suite.buildErr)
	}
	return suite.binary
}

// MiniKCMBinaryWithoutRace returns a mini-kcm binary built without the race detector
// (MINI_KCM_STATIC_BINARY, which make sets to the release build, or one built on
// first use), for the rare test that must run what the race detector would stop for
// a reason outside mini-kcm: say why where it is used.
func MiniKCMBinaryWithoutRace(tb testing.TB) string {
	tb.Helper()
	suite.plainOnce.Do(func() {
		if path := os.Getenv("MINI_KCM_STATIC_BINARY"); path != "" {
			suite.plainBinary, suite.plainErr = fromModuleRoot(path)
			return
		}
		suite.plainBinary, suite.plainErr = buildMiniKCM(tb, false, "")
	})
	if suite.plainErr != nil {
		tb.Fatalf("mini-kcm binary without the race detector: %v", suite.plainErr)
	}
	return suite.plainBinary
}

// MiniKCMBinaryWithMutation builds a mini-kcm with a planted bug (sharding's
// plantedMutation, which only the linker sets), for the test of a test: it runs a
// check against the planted bug and shows the check fails. Without the race detector,
// whose build would take longer and which that test does not need; with the build
// settings of the test run (make test-e2e's are make build's), so that only the link
// is new.
func MiniKCMBinaryWithMutation(tb testing.TB, mutation string) string {
	tb.Helper()
	path, err := buildMiniKCM(tb, false, mutation)
	if err != nil {
		tb.Fatalf("mini-kcm binary with the mutation %q: %v", mutation, err)
	}
	return path
}

// fromModuleRoot resolves a binary's path given in the environment: a relative path
// is relative to the module root, where make runs, not to the package directory go
// test runs in.
func fromModuleRoot(path string) (string, error) {
	if filepath.IsAbs(path) {
		return path, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, path), nil
}

func buildMiniKCM(tb testing.TB, race bool, mutation string) (string, error) {
	dir := suite.workDir
	if dir == "" {
		// Used outside Run (e.g. a test that only runs the binary): the test's own temp
		// dir would vanish with that test, so build next to the other temp files.
		var err error
		if dir, err = os.MkdirTemp("", "mini-kcm-e2e-"); err != nil {
			return "", err
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "mini-kcm")
	args := []string{"build", "-o", out}
	if race {
		out += "-race"
		args = []string{"build", "-race", "-o", out}
	}
	if mutation != "" {
		out += "-mutation-" + mutation
		args = []string{"build", "-o", out, "-ldflags", "-X github.com/mini-kcm/mini-kcm/sharding.plantedMutation=" + mutation}
	}
	args = append(args, "./cmd/mini-kcm")
	begin := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if race {
		// make test-e2e builds the test binaries static; the race detector needs cgo.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
	}
	tb.Logf("built mini-kcm in %v", time.Since(begin).Round(10*time.Millisecond))
	return out, nil
}

// moduleRoot returns the directory of the main module.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
