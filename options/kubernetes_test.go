package options

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// An apiserver in the tested range, as it is or as it emulates, passes; a newer or an
// older one is named, with the range, and what to do.
func TestAnAPIServerOutsideTheTestedRangeIsNamedWithTheRange(t *testing.T) {
	for _, tc := range []struct {
		info apimachineryversion.Info
		want string
	}{
		{apimachineryversion.Info{GitVersion: "v1.37.2"}, ""},
		{apimachineryversion.Info{GitVersion: "v1.34.0-eks-1234"}, ""},
		{apimachineryversion.Info{GitVersion: "v1.37.2", EmulationMajor: "1", EmulationMinor: "35"}, ""},
		{apimachineryversion.Info{GitVersion: "v1.38.0"}, "newer than the versions mini-kcm is tested against (v1.34 to v1.37)"},
		{apimachineryversion.Info{GitVersion: "v1.39.1", EmulationMajor: "1", EmulationMinor: "38"}, "v1.39.1 (emulating v1.38) is newer"},
		{apimachineryversion.Info{GitVersion: "v1.33.5"}, "older than the versions mini-kcm is tested against (v1.34 to v1.37)"},
		{apimachineryversion.Info{GitVersion: "master"}, "not a Kubernetes version"},
	} {
		got := CheckAPIServerVersion(tc.info)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CheckAPIServerVersion(%+v) = %q; want %q", tc.info, got, tc.want)
		}
	}
}

// The README and deploy/README.md state the range the start checks and --help states.
func TestTheDocsStateTheSupportedRange(t *testing.T) {
	for _, doc := range []string{"README.md", "deploy/README.md"} {
		data, err := os.ReadFile(filepath.Join("..", doc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), SupportedAPIServers()) {
			t.Errorf("%s does not state the supported kube-apiserver versions, %s", doc, SupportedAPIServers())
		}
	}
}
