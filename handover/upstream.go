package handover

import (
	"sort"
	"strconv"
	"strings"

	"github.com/mini-kcm/mini-kcm/options/controllersflag"
)

// upstreamVersion is the kube-controller-manager whose controller list Upstream is.
const upstreamVersion = "v1.37.2"

// upstreamController is one of kube-controller-manager's controllers as its
// --controllers flag knows it (cmd/kube-controller-manager/app/*.go, names/).
type upstreamController struct {
	name              string
	aliases           []string
	disabledByDefault bool
}

// upstreamControllers is kube-controller-manager v1.37.2's list of controllers: its
// canonical names, the aliases kept for old --controllers values, and the ones "*"
// leaves off. Only the names matter for the verdict on ours, but the whole list lets
// the check evaluate a value exactly as upstream does and tell a name upstream would
// refuse to start with.
var upstreamControllers = []upstreamController{
	{name: "serviceaccount-token-controller", aliases: []string{"serviceaccount-token"}},
	{name: "endpoints-controller", aliases: []string{"endpoint"}},
	{name: "endpointslice-controller", aliases: []string{"endpointslice"}},
	{name: "endpointslice-mirroring-controller", aliases: []string{"endpointslicemirroring"}},
	{name: "replicationcontroller-controller", aliases: []string{"replicationcontroller"}},
	{name: "pod-garbage-collector-controller", aliases: []string{"podgc"}},
	{name: "resourcequota-controller", aliases: []string{"resourcequota"}},
	{name: "namespace-controller", aliases: []string{"namespace"}},
	{name: "serviceaccount-controller", aliases: []string{"serviceaccount"}},
	{name: "garbage-collector-controller", aliases: []string{"garbagecollector"}},
	{name: "daemonset-controller", aliases: []string{"daemonset"}},
	{name: "job-controller", aliases: []string{"job"}},
	{name: "deployment-controller", aliases: []string{"deployment"}},
	{name: "replicaset-controller", aliases: []string{"replicaset"}},
	{name: "horizontal-pod-autoscaler-controller", aliases: []string{"horizontalpodautoscaling"}},
	{name: "disruption-controller", aliases: []string{"disruption"}},
	{name: "statefulset-controller", aliases: []string{"statefulset"}},
	{name: "cronjob-controller", aliases: []string{"cronjob"}},
	{name: "certificatesigningrequest-signing-controller", aliases: []string{"csrsigning"}},
	{name: "certificatesigningrequest-approving-controller", aliases: []string{"csrapproving"}},
	{name: "certificatesigningrequest-cleaner-controller", aliases: []string{"csrcleaner"}},
	{name: "podcertificaterequest-cleaner-controller"},
	{name: "ttl-controller", aliases: []string{"ttl"}},
	{name: "bootstrap-signer-controller", aliases: []string{"bootstrapsigner"}, disabledByDefault: true},
	{name: "token-cleaner-controller", aliases: []string{"tokencleaner"}, disabledByDefault: true},
	{name: "node-ipam-controller", aliases: []string{"nodeipam"}},
	{name: "node-lifecycle-controller", aliases: []string{"nodelifecycle"}},
	{name: "taint-eviction-controller"},
	{name: "device-taint-eviction-controller"},
	{name: "persistentvolume-binder-controller", aliases: []string{"persistentvolume-binder"}},
	{name: "persistentvolume-attach-detach-controller", aliases: []string{"attachdetach"}},
	{name: "persistentvolume-expander-controller", aliases: []string{"persistentvolume-expander"}},
	{name: "clusterrole-aggregation-controller", aliases: []string{"clusterrole-aggregation"}},
	{name: "persistentvolumeclaim-protection-controller", aliases: []string{"pvc-protection"}},
	{name: "persistentvolume-protection-controller", aliases: []string{"pv-protection"}},
	{name: "podgroup-protection-controller"},
	{name: "ttl-after-finished-controller", aliases: []string{"ttl-after-finished"}},
	{name: "root-ca-certificate-publisher-controller", aliases: []string{"root-ca-cert-publisher"}},
	{name: "kube-apiserver-serving-clustertrustbundle-publisher-controller"},
	{name: "ephemeral-volume-controller", aliases: []string{"ephemeral-volume"}},
	{name: "storageversion-garbage-collector-controller", aliases: []string{"storage-version-gc"}},
	{name: "resourceclaim-controller", aliases: []string{"resource-claim-controller"}},
	{name: "resourcepoolstatusrequest-controller"},
	{name: "legacy-serviceaccount-token-cleaner-controller", aliases: []string{"legacy-service-account-token-cleaner"}},
	{name: "validatingadmissionpolicy-status-controller"},
	{name: "volumeattributesclass-protection-controller"},
	{name: "service-cidr-controller"},
	{name: "storage-version-migrator-controller", aliases: []string{"svm"}},
	{name: "selinux-warning-controller", disabledByDefault: true},
}

// upstreamList is kube-controller-manager's list as an controllersflag.List, so that
// its --controllers is evaluated by the same code as ours.
type upstreamList struct{}

// Upstream is kube-controller-manager v1.37.2's list of controllers.
var Upstream controllersflag.List = upstreamList{}

func (upstreamList) Names() []string {
	names := make([]string, 0, len(upstreamControllers))
	for _, c := range upstreamControllers {
		names = append(names, c.name)
	}
	sort.Strings(names)
	return names
}

func (upstreamList) Canonical(nameOrAlias string) (string, bool) {
	for _, c := range upstreamControllers {
		if c.name == nameOrAlias {
			return c.name, true
		}
		for _, a := range c.aliases {
			if a == nameOrAlias {
				return c.name, true
			}
		}
	}
	return "", false
}

func (upstreamList) DisabledByDefault() []string {
	var names []string
	for _, c := range upstreamControllers {
		if c.disabledByDefault {
			names = append(names, c.name)
		}
	}
	sort.Strings(names)
	return names
}

// Flags are the flags of a kube-controller-manager or mini-kcm command line this
// package reads.
type Flags struct {
	// Controllers is --controllers split at commas; ["*"], the default of both, when the
	// flag is absent.
	Controllers []string
	// LeaderElect is --leader-elect (default true), and LeaseNamespace and LeaseName its
	// Lease (--leader-elect-resource-namespace and -name, upstream's default
	// kube-system/kube-controller-manager).
	LeaderElect               bool
	LeaseNamespace, LeaseName string
	// Shards is mini-kcm's --shards (0 when absent).
	Shards int
}

// ParseFlags reads the flags of a kube-controller-manager command line (a container's
// command followed by its args), as pflag does: "--name=value" or "--name value", and a
// repeated --controllers adds to the list, as a string slice flag does.
func ParseFlags(commandLine []string) Flags {
	return parseCommandLine(commandLine, Flags{LeaderElect: true, LeaseNamespace: "kube-system", LeaseName: "kube-controller-manager"})
}

// parseCommandLine is ParseFlags with the defaults of the command's Lease flags.
func parseCommandLine(commandLine []string, f Flags) Flags {
	var (
		controllers []string
		seen        bool
	)
	for i := 0; i < len(commandLine); i++ {
		arg := commandLine[i]
		if !strings.HasPrefix(arg, "--") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !hasValue && name != "leader-elect" && i+1 < len(commandLine) && !strings.HasPrefix(commandLine[i+1], "-") {
			i++
			value, hasValue = commandLine[i], true
		}
		switch name {
		case "controllers":
			seen = true
			for _, c := range strings.Split(value, ",") {
				if c = strings.TrimSpace(c); c != "" {
					controllers = append(controllers, c)
				}
			}
		case "leader-elect":
			f.LeaderElect = !hasValue || value == "true"
		case "leader-elect-resource-namespace":
			f.LeaseNamespace = value
		case "leader-elect-resource-name":
			f.LeaseName = value
		case "shards":
			f.Shards, _ = strconv.Atoi(value)
		}
	}
	f.Controllers = controllers
	if !seen {
		f.Controllers = []string{"*"}
	}
	return f
}
