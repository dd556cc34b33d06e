package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that exits by itself may leave children in its group: they are killed by
// the time its exit is reported, before it is reaped, while the group's id is still
// its own. (Killed after the reaping, the id could by then lead somebody else's group.)
func TestAnExitedProcessLeavesNoChildBehindAndItsGroupIsSignalledBeforeItIsReaped(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	p, err := StartProcess(ProcessSpec{Name: "leaves-a-child", Path: "/bin/sh",
		Args: []string{"-c", "sleep 600 & echo $! > " + pidFile + "; exit 0"}, LogPath: os.DevNull})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the shell did not exit")
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	eventually(t, 5*time.Second, func() error {
		if err := syscall.Kill(child, 0); err == nil && !zombie(child) {
			return fmt.Errorf("the child %d of an exited process still runs", child)
		}
		return nil
	})
}

// A pid read from a node's cgroup may belong to another process by the time it is
// signalled; killNodeProcess signals only a process that is still the node's.
func TestKillNodeProcessNeverKillsAProcessThatIsNotTheNodes(t *testing.T) {
	sleep := exec.Command("/bin/sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleep.Wait() }()
	t.Cleanup(func() { _ = sleep.Process.Kill() })
	killNodeProcess(sleep.Process.Pid, func(pid int) bool { return inCgroup(pid, "/mini-kcm-node-0-0") })
	select {
	case err := <-done:
		t.Fatalf("a process outside the node's cgroup was killed: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The same call for a process that is the node's kills it.
	killNodeProcess(sleep.Process.Pid, func(int) bool { return true })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a process that is the node's was not killed")
	}
}

// A control plane directory beneath which a file system is still mounted (a node whose
// cleanup failed) is not removed: RemoveAll would delete what the mount shows, which
// may be the host's own files.
func TestADirectoryWithAMountBeneathItIsNotRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("!!!! SKIPPING: mounting a file system needs root (CI runs as root)")
	}
	dir := t.TempDir()
	mount := filepath.Join(dir, "node", "rootfs")
	if err := os.MkdirAll(mount, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mount, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mount, syscall.MNT_DETACH) })
	precious := filepath.Join(mount, "precious")
	if err := os.WriteFile(precious, []byte("the host's"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := removeUnmounted(dir)
	if err == nil || !strings.Contains(err.Error(), mount) {
		t.Errorf("removeUnmounted = %v; want an error naming the mount %s", err, mount)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatalf("a file beneath the mount is gone: %v", err)
	}
	if err := syscall.Unmount(mount, 0); err != nil {
		t.Fatal(err)
	}
	if err := removeUnmounted(dir); err != nil {
		t.Fatalf("removeUnmounted after the unmount: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the directory is still there: %v", err)
	}
}
