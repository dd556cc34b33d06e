package controlplane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestAbandonedDirectoriesAreRemovedAndOthersKept(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{
		"abandoned": strconv.Itoa(dead.Process.Pid),
		"ours":      strconv.Itoa(os.Getpid()),
		"kept":      "", // MINI_KCM_KEEP_DIR: no owner file
	}
	for name, owner := range dirs {
		dir := filepath.Join(tmp, tempDirPrefix+name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	removeAbandonedDirs()

	for name, wantKept := range map[string]bool{"abandoned": false, "ours": true, "kept": true} {
		_, err := os.Stat(filepath.Join(tmp, tempDirPrefix+name))
		if kept := err == nil; kept != wantKept {
			t.Errorf("%s: kept = %v, want %v", name, kept, wantKept)
		}
	}
}
