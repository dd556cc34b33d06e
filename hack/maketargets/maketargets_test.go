package maketargets

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is where the Makefile and README.md live, relative to this package.
const repoRoot = "../.."

// readmeHeading is the README section whose table lists the make targets.
const readmeHeading = "Make targets"

// TestTheReadmeListsExactlyTheTargetsOfMakeHelp holds the README's hand-written table to
// the Makefile's `## ` help comments, which `make help` prints.
func TestTheReadmeListsExactlyTheTargetsOfMakeHelp(t *testing.T) {
	makefile, err := os.Open(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer makefile.Close()
	help, err := FromMakefile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	if len(help) == 0 {
		t.Fatal("the Makefile documents no target with a `## ` comment: has make help's format changed?")
	}

	readme, err := os.Open(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer readme.Close()
	listed, err := FromReadme(readme, readmeHeading)
	if err != nil {
		t.Fatal(err)
	}

	missing, extra := Diff(help, listed)
	if len(missing) > 0 {
		t.Errorf("README.md's %q table misses targets that make help lists: %s (add a row \"| `make <target>` | ... |\" for each)",
			readmeHeading, strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("README.md's %q table lists targets that make help does not, or lists them twice: %s (remove them, or give the target a `## ` comment in the Makefile)",
			readmeHeading, strings.Join(extra, ", "))
	}
}

func TestFromMakefileReadsWhatMakeHelpPrints(t *testing.T) {
	const makefile = `# A comment: ## not a target.
VERSION ?= v0 ## a variable, not a target
.PHONY: check-version
check-version:
	@true ## a recipe line
build: check-version ## Build it.
run: build control-plane ## Run it: SHARDS=N.
Upper: ## Not matched by make help's [a-z0-9-] pattern.
test-e2e: ## E2E ## the text after the last marker.
`
	got, err := FromMakefile(strings.NewReader(makefile))
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Name: "build", Help: "Build it."},
		{Name: "run", Help: "Run it: SHARDS=N."},
		{Name: "test-e2e", Help: "the text after the last marker."},
	}
	if !slices.Equal(got, want) {
		t.Errorf("FromMakefile = %v, want %v", got, want)
	}
}

func TestFromReadmeReadsOnlyTheFirstTableUnderTheHeading(t *testing.T) {
	for name, tc := range map[string]struct {
		readme  string
		want    []string
		wantErr bool
	}{
		"the table under the heading, up to the next heading": {
			readme: "# x\n\n| target | what |\n|---|---|\n| `make other` | not this section |\n\n" +
				"## Make targets\n\nSome text.\n\n| target | what |\n|---|---|\n| `make run` | a |\n| `make test-e2e` | b |\n\n" +
				"## Further reading\n\n| `make later` | not this section |\n",
			want: []string{"run", "test-e2e"},
		},
		"the table ends at its first other line": {
			readme: "## Make targets\n\n| target | what |\n|---|---|\n| `make run` | a |\n\nText.\n\n| `make after` | b |\n",
			want:   []string{"run"},
		},
		"a shell comment in a code block is no heading": {
			readme: "## Make targets\n\n```sh\n# Make targets\nmake x\n```\n\n| target | what |\n|---|---|\n| `make run` | a |\n",
			want:   []string{"run"},
		},
		"no such heading": {
			readme:  "## Targets\n\n| `make run` | a |\n",
			wantErr: true,
		},
		"a heading without a table": {
			readme:  "## Make targets\n\nNone.\n\n## Next\n\n| `make run` | a |\n",
			wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := FromReadme(strings.NewReader(tc.readme), readmeHeading)
			if (err != nil) != tc.wantErr {
				t.Fatalf("FromReadme error = %v, want an error: %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("FromReadme = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDiffNamesMissingExtraAndDuplicateTargets(t *testing.T) {
	help := []Target{{Name: "build"}, {Name: "run"}, {Name: "test"}, {Name: "help"}}
	missing, extra := Diff(help, []string{"run", "build", "bench", "run"})
	if want := []string{"help", "test"}; !slices.Equal(missing, want) {
		t.Errorf("missing = %q, want %q", missing, want)
	}
	if want := []string{"bench", "run"}; !slices.Equal(extra, want) {
		t.Errorf("extra = %q, want %q", extra, want)
	}
}
