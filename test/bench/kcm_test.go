package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// The controllers benchmarked come from the registry: every registered controller runs,
// in the shared workloads or in one of its own, and a workload that names a controller
// the registry does not know (renamed, removed) fails here rather than an hour into
// make bench.
func TestEveryRegisteredControllerIsBenchmarked(t *testing.T) {
	registry := all.Registry()
	shared := strings.Split(benchedControllers(), ",")
	covered := slices.Clone(shared)
	for _, w := range allWorkloads() {
		if w.controllers == "" {
			continue
		}
		for _, name := range strings.Split(w.controllers, ",") {
			if _, ok := registry.Get(name); !ok {
				t.Errorf("workload %s runs %q, which is not a registered controller (%v)", w.name, name, registry.Names())
			}
			if slices.Contains(shared, name) {
				t.Errorf("workload %s runs %s alone, yet the shared workloads run it too", w.name, name)
			}
			covered = append(covered, name)
		}
	}
	for _, name := range registry.Names() {
		if !slices.Contains(covered, name) {
			t.Errorf("no workload runs %s", name)
		}
	}
}

// Both controller managers get the same worker count for every registered controller.
func TestSettingsGiveEveryControllerTheWorkerCount(t *testing.T) {
	args := Settings{QPS: 20, Burst: 30, ConcurrentSyncs: 7}.args()
	for _, want := range []string{"--kube-api-qps=20", "--kube-api-burst=30", "--concurrent-replicaset-syncs=7"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	for _, flag := range workerFlags() {
		if !slices.Contains(args, "--"+flag+"=7") {
			t.Errorf("args %v lack --%s=7", args, flag)
		}
	}
	// Each controller has one worker flag, as upstream's do.
	if got, want := len(workerFlags()), len(all.Descriptors()); got != want {
		t.Errorf("the registry's controllers have %d worker flags %v, want one each (%d)", got, workerFlags(), want)
	}
}
