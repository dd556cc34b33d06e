package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The benchmarks that measure an e2e test of test/e2e/ha (make bench-recovery, make
// bench-fence) run it with go test, read the lines of figures it logs, write the
// results as JSON and Markdown and quote the docs again: this is what they share.

// RunE2ETest runs go test -run test (-count count) in pkg with env added, writing its
// output to logPath, and returns the output and whether it passed.
func RunE2ETest(ctx context.Context, pkg, test string, count int, env []string, logPath string) ([]byte, bool, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, false, err
	}
	defer logFile.Close()
	var output bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "test", fmt.Sprintf("-count=%d", count), "-v", "-timeout=60m", "-run", test, pkg)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = io.MultiWriter(logFile, &output)
	cmd.Stderr = logFile
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	return output.Bytes(), runErr == nil, nil
}

// WriteResults writes report as <dir>/<name>.json and markdown as <dir>/<name>.md,
// then rewrites the quotes of every doc (comma-separated) with quote.
func WriteResults(dir, name string, report any, markdown, docs string, quote func(doc []byte, root string) ([]byte, int, error)) error {
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(markdown), 0o644); err != nil {
		return err
	}
	for _, doc := range strings.Split(docs, ",") {
		if doc = strings.TrimSpace(doc); doc == "" {
			continue
		}
		text, err := os.ReadFile(doc)
		if err != nil {
			return err
		}
		quoted, n, err := quote(text, ".")
		if err != nil {
			return fmt.Errorf("%s: %w", doc, err)
		}
		if n > 0 {
			if err := os.WriteFile(doc, quoted, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// HeadCommit names the commit measured.
func HeadCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// TrackedChanges reports whether tracked files have uncommitted changes (or this is no
// git checkout): figures must name the commit they measured.
func TrackedChanges() bool {
	out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	return err != nil || len(strings.TrimSpace(string(out))) > 0
}
