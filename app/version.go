package app

import (
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	componentversion "k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
)

// mini-kcm's version lives where every Kubernetes component's does, in
// k8s.io/component-base/version, whose variables a release build sets with the linker
// as upstream's hack/lib/version.sh does (make build and the image do; see LDFLAGS in
// the Makefile):
//
//	-X k8s.io/component-base/version.gitVersion=v0.3.0
//	-X k8s.io/component-base/version.gitCommit=<sha>
//	-X k8s.io/component-base/version.gitTreeState=clean|dirty
//	-X k8s.io/component-base/version.buildDate=2026-01-02T03:04:05Z
//
// A plain "go build" or "go install" sets none of them. Rather than report
// component-base's placeholders ("v0.0.0-master+$Format:%H$"), Info then takes what
// the Go toolchain recorded about the build: the main module's version (derived from
// the checkout's tags and commit since Go 1.24), vcs.revision and vcs.modified.

// unknownVersion is the version of a build that recorded none: no stamp, no module
// version, no checkout (go test, -buildvcs=false).
const unknownVersion = "v0.0.0-unknown"

// Info returns this build's version information: what --version prints, what
// kubernetes_build_info reports, and whose GitVersion every client's user agent carries.
func Info() apimachineryversion.Info {
	build, _ := debug.ReadBuildInfo()
	return completeInfo(componentversion.Get(), build)
}

// Version returns mini-kcm's version, e.g. "v0.3.0".
func Version() string { return Info().GitVersion }

// completeInfo fills the fields of info that the linker did not stamp from build (nil
// if the binary carries no build information).
func completeInfo(info apimachineryversion.Info, build *debug.BuildInfo) apimachineryversion.Info {
	vcs := map[string]string{}
	moduleVersion := ""
	if build != nil {
		for _, s := range build.Settings {
			vcs[s.Key] = s.Value
		}
		moduleVersion = build.Main.Version
	}
	if unstamped(info.GitCommit) {
		info.GitCommit = vcs["vcs.revision"]
	}
	if info.GitTreeState == "" {
		switch vcs["vcs.modified"] {
		case "true":
			info.GitTreeState = "dirty"
		case "false":
			info.GitTreeState = "clean"
		}
	}
	if unstamped(info.GitVersion) {
		// "(devel)" is what Go records without a module version.
		info.GitVersion = unknownVersion
		if strings.HasPrefix(moduleVersion, "v") {
			info.GitVersion = moduleVersion
		}
	}
	if info.Major == "" && info.Minor == "" {
		if v, err := utilversion.ParseSemantic(info.GitVersion); err == nil {
			info.Major, info.Minor = strconv.FormatUint(uint64(v.Major()), 10), strconv.FormatUint(uint64(v.Minor()), 10)
		}
	}
	return info
}

// unstamped tells a version variable that the linker did not set: still
// component-base's "$Format:...$" placeholder (which only "git archive" replaces), or
// stamped empty by a build that knew no value.
func unstamped(value string) bool {
	return value == "" || strings.Contains(value, "$Format")
}

// printVersionIfRequested prints the version for --version and --version=raw (the flag
// of component-base's verflag, parsed into fs) in verflag's formats, and reports
// whether it did. verflag.PrintAndExitIfRequested itself is not used: it names the
// program "Kubernetes", prints the linker-stamped values only, and exits the process
// from inside the command.
func printVersionIfRequested(w io.Writer, fs *pflag.FlagSet) bool {
	flag := fs.Lookup("version")
	if flag == nil {
		return false
	}
	switch flag.Value.String() {
	case string(verflag.VersionRaw):
		fmt.Fprintf(w, "%#v\n", Info())
	case string(verflag.VersionTrue):
		fmt.Fprintf(w, "mini-kcm %s\n", Info())
	default:
		return false
	}
	return true
}

// buildInfo is component-base's kubernetes_build_info, with the same name, help, labels
// and stability so that dashboards made for Kubernetes components work. It is defined
// here rather than by importing k8s.io/component-base/metrics/prometheus/version, whose
// init fixes the values from the linker-stamped variables alone, placeholders included.
var buildInfo = metrics.NewGaugeVec(
	&metrics.GaugeOpts{
		Name: "kubernetes_build_info",
		Help: "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, " +
			"build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
		StabilityLevel: metrics.BETA,
	},
	[]string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"},
)

func init() {
	// Registered at init like every metric of component-base, so that /metrics shows
	// it whichever part of the program serves first.
	legacyregistry.MustRegister(buildInfo)
	info := Info()
	buildInfo.WithLabelValues(info.Major, info.Minor, info.GitVersion, info.GitCommit, info.GitTreeState,
		info.BuildDate, info.GoVersion, info.Compiler, info.Platform).Set(1)
}

// userAgent names a client in the apiserver's audit log and metrics, e.g.
// "mini-kcm/v1.2.3 (replicaset-controller)".
func userAgent(client string) string {
	return "mini-kcm/" + Version() + " (" + client + ")"
}
