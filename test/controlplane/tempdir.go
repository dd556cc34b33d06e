package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// tempDirPrefix names the directories Start creates in the system temp directory.
const tempDirPrefix = "mini-kcm-controlplane-"

// ownerFile holds the pid of the process that owns a temporary control plane directory.
// A test binary killed by SIGKILL or by `go test -timeout` cannot remove its directory
// (its children die with it), so the next Start removes directories whose owner is gone.
// Directories kept on purpose (MINI_KCM_KEEP_DIR=1) have no owner file and stay.
const ownerFile = "owner.pid"

func markOwner(dir string, removable bool) error {
	if !removable {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", ownerFile, err)
	}
	return nil
}

// removeAbandonedDirs removes temporary control plane directories whose owner process
// no longer exists. It is best effort: a directory it cannot judge stays.
func removeAbandonedDirs() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tempDirPrefix) {
			continue
		}
		dir := filepath.Join(os.TempDir(), e.Name())
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			if err := removeUnmounted(dir); err != nil {
				fmt.Fprintf(os.Stderr, "WARNING: mini-kcm test harness: %v\n", err)
			}
		}
	}
}

// errNodeNeedsLinux is the error of the node's functions off Linux.
var errNodeNeedsLinux = errors.New("the local node needs Linux (network namespaces, cgroups, containerd)")

// removeUnmounted removes dir and everything in it, unless a file system is still
// mounted beneath it (a node whose cleanup failed: an overlay root, a volume, a bind
// mount of a host path). RemoveAll would walk into those and delete what they show,
// which may be the host's own files; the directory then stays for the next run to
// clean up once the mounts are gone.
func removeUnmounted(dir string) error {
	mounted, err := mountedUnder(dir)
	if err != nil {
		return fmt.Errorf("not removing %s: reading the mounts: %w", dir, err)
	}
	if len(mounted) > 0 {
		return fmt.Errorf("not removing %s: %d file systems are still mounted beneath it (%s); the next run removes it once they are gone",
			dir, len(mounted), strings.Join(mounted, ", "))
	}
	return os.RemoveAll(dir)
}

// mountedUnder lists the mount points beneath dir.
func mountedUnder(dir string) ([]string, error) {
	points, err := MountPoints()
	if errors.Is(err, errNodeNeedsLinux) {
		return nil, nil // no node, no mounts of ours
	}
	if err != nil {
		return nil, err
	}
	var under []string
	for _, p := range points {
		if strings.HasPrefix(p, filepath.Clean(dir)+"/") {
			under = append(under, p)
		}
	}
	return under, nil
}
