package app

import (
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

func TestVersionFlagPrintsThisBuildsVersion(t *testing.T) {
	tests := []struct {
		arg  string
		want []string
	}{
		{"--version", []string{"mini-kcm " + Version() + "\n"}},
		{"--version=true", []string{"mini-kcm " + Version() + "\n"}},
		// verflag's raw format: every field, in Go syntax.
		{"--version=raw", []string{"version.Info{", `GitVersion:"` + Version() + `"`, `GitCommit:"`, `GoVersion:"go`, `Platform:"`}},
	}
	for _, tc := range tests {
		out, err := execute(t, tc.arg)
		if err != nil {
			t.Errorf("%s: %v", tc.arg, err)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s printed %q, want it to contain %q", tc.arg, out, want)
			}
		}
		if strings.Contains(out, "$Format") {
			t.Errorf("%s printed component-base's unstamped placeholder: %q", tc.arg, out)
		}
	}
	if out, err := execute(t, "leader", "--version"); err != nil || out != "mini-kcm "+Version()+"\n" {
		t.Errorf("leader --version printed %q, %v; want the version", out, err)
	}
	// --version=false runs the command: here up to its positional argument check.
	if _, err := execute(t, "--version=false", "extra"); err == nil || !strings.Contains(err.Error(), "does not take any arguments") {
		t.Errorf("--version=false: %v, want the command to run", err)
	}
}

func TestInfoFillsWhatTheLinkerDidNotStampFromTheGoBuildInfo(t *testing.T) {
	unstamped := apimachineryversion.Info{
		GitVersion: "v0.0.0-master+$Format:%H$", GitCommit: "$Format:%H$", BuildDate: "1970-01-01T00:00:00Z",
	}
	stamped := apimachineryversion.Info{
		Major: "0", Minor: "3", GitVersion: "v0.3.0", GitCommit: "0123abcd", GitTreeState: "clean", BuildDate: "2026-01-02T03:04:05Z",
	}
	checkout := &debug.BuildInfo{
		Main: debug.Module{Version: "v0.0.0-20260101120000-a1d2636abcde+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "a1d2636abcdef0123456789"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name  string
		info  apimachineryversion.Info
		build *debug.BuildInfo
		want  apimachineryversion.Info
	}{
		{"a stamped build is left alone", stamped, checkout, stamped},
		{"go build in a checkout: module version and commit from Go", unstamped, checkout, apimachineryversion.Info{
			Major: "0", Minor: "0", GitVersion: "v0.0.0-20260101120000-a1d2636abcde+dirty",
			GitCommit: "a1d2636abcdef0123456789", GitTreeState: "dirty", BuildDate: "1970-01-01T00:00:00Z",
		}},
		{"go install of a released module", unstamped, &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}},
			apimachineryversion.Info{Major: "0", Minor: "3", GitVersion: "v0.3.0", BuildDate: "1970-01-01T00:00:00Z"}},
		{"nothing recorded", unstamped, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			apimachineryversion.Info{Major: "0", Minor: "0", GitVersion: "v0.0.0-unknown", BuildDate: "1970-01-01T00:00:00Z"}},
		{"no build information at all", unstamped, nil,
			apimachineryversion.Info{Major: "0", Minor: "0", GitVersion: "v0.0.0-unknown", BuildDate: "1970-01-01T00:00:00Z"}},
		{"an image built without a commit stamps empty values", apimachineryversion.Info{GitVersion: "v0.3.0", BuildDate: "2026-01-02T03:04:05Z"}, nil,
			apimachineryversion.Info{Major: "0", Minor: "3", GitVersion: "v0.3.0", BuildDate: "2026-01-02T03:04:05Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := completeInfo(tc.info, tc.build); got != tc.want {
				t.Errorf("completeInfo\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestUserAgentCarriesTheVersion(t *testing.T) {
	if got, want := userAgent("replicaset-controller"), "mini-kcm/"+Version()+" (replicaset-controller)"; got != want {
		t.Errorf("userAgent = %q, want %q", got, want)
	}
}

// The image must carry the same version information as make build: both stamp the
// same component-base variables.
func TestMakefileAndDockerfileStampTheSameVersionVariables(t *testing.T) {
	stamped := regexp.MustCompile(`-X ([\w./-]+)=`)
	variables := func(path string) []string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var vars []string
		for _, m := range stamped.FindAllStringSubmatch(string(data), -1) {
			vars = append(vars, m[1])
		}
		slices.Sort(vars)
		return slices.Compact(vars)
	}
	want := []string{
		"k8s.io/component-base/version.buildDate",
		"k8s.io/component-base/version.gitCommit",
		"k8s.io/component-base/version.gitTreeState",
		"k8s.io/component-base/version.gitVersion",
	}
	for _, path := range []string{"../Makefile", "../Dockerfile"} {
		if got := variables(path); !slices.Equal(got, want) {
			t.Errorf("%s stamps %q, want %q", path, got, want)
		}
	}
}
