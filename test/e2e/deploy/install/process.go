package install

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ContainerArgs returns the arguments of the container named container in the
// StatefulSet named statefulSet, as the manifests give them.
func ContainerArgs(manifests []Manifest, statefulSet, container string) ([]string, error) {
	for _, m := range manifests {
		if m.Object.GetKind() != "StatefulSet" || m.Object.GetName() != statefulSet {
			continue
		}
		containers, _, err := unstructured.NestedSlice(m.Object.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		for _, c := range containers {
			c, ok := c.(map[string]any)
			if !ok || c["name"] != container {
				continue
			}
			args, _, err := unstructured.NestedStringSlice(c, "args")
			if err != nil {
				return nil, fmt.Errorf("%s, container %s: %w", m, container, err)
			}
			return args, nil
		}
		return nil, fmt.Errorf("%s has no container %q", m, container)
	}
	return nil, fmt.Errorf("no StatefulSet %q in the manifests", statefulSet)
}

// podOnlyFlags are the container flags that only make sense inside a pod: serving on
// the pod's own IP and a fixed port with the pod's certificate, and the in-cluster
// configuration (no --kubeconfig, no --authentication-kubeconfig or
// --authorization-kubeconfig). Local processes share one host, so each serves on
// loopback and a free port of its own and names its kubeconfigs.
var podOnlyFlags = []string{"bind-address", "secure-port", "cert-dir", "tls-cert-file", "tls-private-key-file",
	"kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig"}

// WithoutPodOnlyFlags returns a container's arguments without the flags that only make
// sense inside a pod, for a local process that otherwise behaves like the pod; the
// caller adds its own --kubeconfig and serving flags (controlplane.ServingFlags).
func WithoutPodOnlyFlags(containerArgs []string) []string {
	var args []string
	for _, a := range containerArgs {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(podOnlyFlags, name) {
			args = append(args, a)
		}
	}
	return args
}

// FlagValue returns the value of --name=value in args, the last one if repeated, as
// pflag reads it.
func FlagValue(args []string, name string) (string, bool) {
	value, found := "", false
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}
