package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KubernetesVersion is the version of the control plane binaries; the cache directory
// is keyed by it.
const KubernetesVersion = "v1.37.2"

// BinDir returns where the control plane binaries live: $MINI_KCM_BIN_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/mini-kcm/<version>/bin, the same rule as
// hack/build-control-plane.sh.
func BinDir() string {
	if dir := os.Getenv("MINI_KCM_BIN_DIR"); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "mini-kcm", KubernetesVersion, "bin")
}

// checkBinaries fails with instructions when a binary the options need is missing.
func checkBinaries(opts Options) error {
	needed := []string{Etcd, KubeAPIServer}
	if opts.Scheduler {
		needed = append(needed, KubeScheduler)
	}
	if opts.KWOK {
		needed = append(needed, KWOK)
	}
	return requireBinaries(opts.BinDir, needed...)
}

// Binary returns the path of the named binary in BinDir, or an error with
// instructions when it is missing. Suites that start kube-controller-manager use it.
func Binary(name string) (string, error) {
	dir := BinDir()
	if err := requireBinaries(dir, name); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

func requireBinaries(dir string, names ...string) error {
	var missing []string
	for _, name := range names {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control plane binaries missing from %s: %s; run `make control-plane` "+
			"(builds them from source, ~13 minutes the first time) or point MINI_KCM_BIN_DIR at a directory that has them",
			dir, strings.Join(missing, ", "))
	}
	return nil
}

// Tail returns the last n lines of the file at path, or a note saying why it cannot.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
