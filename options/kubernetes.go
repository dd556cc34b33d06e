package options

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// The Kubernetes mini-kcm is made for, and tested against.
var (
	// emulatedVersion is the Kubernetes version whose controllers mini-kcm clones (their
	// behaviour on the same inputs, their gate defaults), v1.37.
	emulatedVersion = version.MajorMinor(1, 37)
	// oldestAPIServer is the oldest kube-apiserver mini-kcm is tested against: the
	// oldest version the v1.37 kube-apiserver emulates (--emulated-version reaches
	// three minor versions back), so that make test runs each of the range on one
	// binary.
	oldestAPIServer = emulatedVersion.SubtractMinor(3)
)

// SupportedAPIServers says which kube-apiserver versions mini-kcm supports, for --help,
// the start log and the docs: the tested range, v1.34 to v1.37.
func SupportedAPIServers() string {
	return fmt.Sprintf("v%d.%d to v%d.%d", oldestAPIServer.Major(), oldestAPIServer.Minor(), emulatedVersion.Major(), emulatedVersion.Minor())
}

// TestedAPIServerMinors lists the minor versions of the supported range, oldest first
// ("1.34", ..., "1.37"): make test runs each (test/e2e/versions).
func TestedAPIServerMinors() []string {
	var out []string
	for v := oldestAPIServer; !v.GreaterThan(emulatedVersion); v = v.AddMinor(1) {
		out = append(out, fmt.Sprintf("%d.%d", v.Major(), v.Minor()))
	}
	return out
}

// CheckAPIServerVersion says what is wrong with running against a kube-apiserver that
// reports info (its /version), or "" when it is in the supported range. An apiserver
// started with --emulated-version is judged by the version it emulates: its APIs and
// gate defaults are that version's. Newer is allowed by Kubernetes' version skew policy
// (a controller manager may be one minor version older than its apiserver) but not
// tested: APIs mini-kcm uses may have changed behind a new default. Older may lack
// what the controllers rely on.
func CheckAPIServerVersion(info apimachineryversion.Info) string {
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return fmt.Sprintf("the apiserver reports version %q, which is not a Kubernetes version; mini-kcm supports kube-apiserver %s",
			info.GitVersion, SupportedAPIServers())
	}
	minor := version.MajorMinor(v.Major(), v.Minor())
	described := info.GitVersion
	if info.EmulationMajor != "" || info.EmulationMinor != "" {
		emulated, err := version.ParseGeneric(info.EmulationMajor + "." + info.EmulationMinor)
		if err != nil {
			return fmt.Sprintf("the apiserver reports emulating version %q.%q, which is not a Kubernetes version; mini-kcm "+
				"supports kube-apiserver %s", info.EmulationMajor, info.EmulationMinor, SupportedAPIServers())
		}
		minor = version.MajorMinor(emulated.Major(), emulated.Minor())
		described = fmt.Sprintf("%s (emulating v%d.%d)", info.GitVersion, emulated.Major(), emulated.Minor())
	}
	switch {
	case minor.GreaterThan(emulatedVersion):
		return fmt.Sprintf("kube-apiserver %s is newer than the versions mini-kcm is tested against (%s): it runs the controllers of "+
			"Kubernetes v%d.%d, as a kube-controller-manager one minor version older than its apiserver would (the skew "+
			"policy allows that one); upgrade mini-kcm to a release that supports v%d.%d",
			described, SupportedAPIServers(), emulatedVersion.Major(), emulatedVersion.Minor(), minor.Major(), minor.Minor())
	case minor.LessThan(oldestAPIServer):
		return fmt.Sprintf("kube-apiserver %s is older than the versions mini-kcm is tested against (%s): APIs and fields its "+
			"controllers use may be missing; upgrade the control plane first", described, SupportedAPIServers())
	}
	return ""
}
