package controlplane

import (
	"slices"
	"testing"
)

// Cleanup after a killed run finds its namespaces and cgroups by the pid in their
// names; a name of another program's must not match.
func TestNodeOwnerReadsThePidOfTheRunThatMadeTheName(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"mini-kcm-node-1234-1", 1234, true},
		{"mini-kcm-node-1234-12", 1234, true},
		{"mini-kcm-node-x-1", 0, false},
		{"mini-kcm-node-1234", 0, false},
		{"mini-kcm-node-1-1", 0, false}, // init is never a test process
		{"mini-kcm-node-1234-1/../..", 0, false},
		{"cni-1234", 0, false},
		{"kubepods", 0, false},
	} {
		pid, ok := nodeOwner(tc.name)
		if ok != tc.ok || (ok && pid != tc.pid) {
			t.Errorf("nodeOwner(%q) = %d, %t; want %d, %t", tc.name, pid, ok, tc.pid, tc.ok)
		}
	}
}

// Mount points with spaces are escaped in mountinfo; unmounting the escaped name
// would leave the mount behind.
func TestParseMountInfoUnescapesMountPointsAndReadsTheType(t *testing.T) {
	data := []byte("36 35 98:0 / /tmp/a\\040b rw,noatime master:1 - overlay overlay rw\n" +
		"37 35 0:30 / /sys/fs/cgroup/memory rw shared:9 - cgroup cgroup rw,memory\n")
	got := parseMountInfo(data)
	want := []mountInfo{{"/tmp/a b", "overlay"}, {"/sys/fs/cgroup/memory", "cgroup"}}
	if !slices.Equal(got, want) {
		t.Errorf("parseMountInfo = %v, want %v", got, want)
	}
}

// kubeadm runs kube-controller-manager with bootstrapsigner and tokencleaner on top of
// the defaults; node mode keeps them and turns off only what it is told.
func TestNodeControllersKeepKubeadmsAndTurnOffExactlyTheGivenOnes(t *testing.T) {
	got := nodeControllers([]string{"deployment-controller", "replicaset-controller"})
	want := "*,bootstrapsigner,tokencleaner,-deployment-controller,-replicaset-controller"
	if got != want {
		t.Errorf("nodeControllers = %q, want %q", got, want)
	}
}
