// Package maketargets reads the make targets that `make help` lists, from the Makefile's
// `## ` help comments, and the ones the README's "Make targets" table lists, so that a
// unit test can fail when the two drift apart: the table is written by hand, `make help`
// is not.
package maketargets

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// helpLine is the line `make help` prints: its grep pattern, '^[a-z0-9-]+:.*## '. The
// target is the name before the first colon, its help the text after the last "## ",
// as help's awk splits it on ':.*## '.
var helpLine = regexp.MustCompile(`^([a-z0-9-]+):.*## (.*)$`)

// Target is one documented make target.
type Target struct {
	Name string
	Help string
}

// FromMakefile returns the targets that `make help` prints, in the Makefile's order.
func FromMakefile(makefile io.Reader) ([]Target, error) {
	var targets []Target
	scanner := bufio.NewScanner(makefile)
	for scanner.Scan() {
		if m := helpLine.FindStringSubmatch(scanner.Text()); m != nil {
			targets = append(targets, Target{Name: m[1], Help: m[2]})
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading the Makefile: %w", err)
	}
	return targets, nil
}

// readmeRow is a row of the README's targets table: "| `make <target>` | what |".
var readmeRow = regexp.MustCompile("^\\|\\s*`make ([^`]+)`\\s*\\|")

// FromReadme returns the targets in the first table under the README's heading, in the
// table's order. It fails when the heading or the table is missing, so that a renamed
// section does not pass for an empty one.
func FromReadme(readme io.Reader, heading string) ([]string, error) {
	var (
		targets                    []string
		inCode, inSection, inTable bool
	)
	scanner := bufio.NewScanner(readme)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			// A shell comment in a code block is no heading.
			continue
		}
		if title, ok := strings.CutPrefix(line, "#"); ok {
			if inSection {
				break
			}
			inSection = strings.TrimSpace(strings.TrimLeft(title, "#")) == heading
			continue
		}
		if !inSection {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		if m := readmeRow.FindStringSubmatch(line); m != nil {
			targets = append(targets, strings.TrimSpace(m[1]))
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading the README: %w", err)
	}
	if !inTable {
		return nil, fmt.Errorf("the README has no table under a heading %q", heading)
	}
	return targets, nil
}

// Diff returns the targets `make help` lists that the README does not (missing) and
// those the README lists that `make help` does not or lists more than once (extra),
// each sorted.
func Diff(help []Target, readme []string) (missing, extra []string) {
	documented := make(map[string]bool, len(help))
	for _, t := range help {
		documented[t.Name] = true
	}
	listed := make(map[string]bool, len(readme))
	for _, name := range readme {
		if !documented[name] || listed[name] {
			extra = append(extra, name)
		}
		listed[name] = true
	}
	for _, t := range help {
		if !listed[t.Name] {
			missing = append(missing, t.Name)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}
