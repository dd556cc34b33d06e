// Package node runs deploy/ as users install it, on a real kubelet: the local control
// plane in node mode (test/controlplane: kubelet, containerd, CNI and kube-proxy in a
// network namespace of their own, kube-controller-manager with mini-kcm's controllers
// off), images built here from the static release binary and imported into the node's
// containerd, and `kubectl apply -k` of a temporary overlay that changes only the
// image. It checks what KWOK nodes cannot: the image runs as 65532 on a read-only root,
// the HTTPS probes pass, the projected token works through the kubernetes Service,
// the kubelet's SIGTERM and SIGKILL and a frozen process fail over as the README says.
//
// The suite needs root and a few packages; without them it skips with one line saying
// what is missing and how to install it, unless MINI_KCM_REQUIRE_NODE=1 (CI), which
// makes that a failure. MINI_KCM_NODE_BINARY is the static mini-kcm binary to put in
// the image (`make build`'s bin/mini-kcm); without it the suite builds one.
package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// RequireNodeEnv set to 1 turns the suite's skip on a machine that cannot run the node
// into a failure.
const RequireNodeEnv = "MINI_KCM_REQUIRE_NODE"

func TestMain(m *testing.M) {
	if err := controlplane.NodeSupported(); err != nil {
		if os.Getenv(RequireNodeEnv) == "1" {
			fmt.Fprintf(os.Stderr, "FAIL: test/e2e/node cannot run (%s=1): %v\n", RequireNodeEnv, err)
			os.Exit(1)
		}
		fmt.Printf("\n!!!! SKIPPING test/e2e/node (deploy/ on a real kubelet): %v\n\n", err)
		os.Exit(0)
	}
	before, err := rootIPTables()
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading the root network namespace's iptables: %v\n", err)
		os.Exit(1)
	}
	mountsBefore, err := controlplane.MountPoints()
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading the mount points: %v\n", err)
		os.Exit(1)
	}
	code := framework.Run(m, controlplane.Options{
		Node:               true,
		NodeControllersOff: all.Registry().Names(),
		// For deploy/sharded; the gate changes nothing for the unsharded installs.
		ExtraAPIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"},
	})
	// The node lived in its own network namespace: the machine's rules must be as
	// they were.
	after, err := rootIPTables()
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading the root network namespace's iptables: %v\n", err)
		code = 1
	} else if !bytes.Equal(before, after) {
		fmt.Fprintf(os.Stderr, "FAIL: the root network namespace's iptables changed during the run:\nbefore:\n%s\nafter:\n%s\n", before, after)
		code = 1
	}
	// Nor may a mount outlive it: the node's overlays, shm, volumes and namespaces, and
	// the /run/netns mount that `ip netns add` makes.
	if mountsAfter, err := controlplane.MountPoints(); err != nil {
		fmt.Fprintf(os.Stderr, "reading the mount points: %v\n", err)
		code = 1
	} else if added := newMountPoints(mountsBefore, mountsAfter); len(added) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the run left mounts behind: %s\n", strings.Join(added, " "))
		code = 1
	}
	os.Exit(code)
}

// newMountPoints returns the mounts of after that before did not have, counting a
// mount point mounted over twice as two.
func newMountPoints(before, after []string) []string {
	had := map[string]int{}
	for _, p := range before {
		had[p]++
	}
	var added []string
	for _, p := range after {
		if had[p] > 0 {
			had[p]--
			continue
		}
		added = append(added, p)
	}
	return added
}

// iptablesNoise is what changes in iptables-save's output without a rule changing:
// the header's date and the packet counters.
var iptablesNoise = regexp.MustCompile(`(?m)^#.*$|\[\d+:\d+\]`)

func rootIPTables() ([]byte, error) {
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		return nil, err
	}
	return iptablesNoise.ReplaceAll(out, nil), nil
}
