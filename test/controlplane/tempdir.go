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
			_ = os.RemoveAll(dir)
		}
	}
}
