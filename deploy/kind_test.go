package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	compiled "github.com/mini-kcm/mini-kcm/controllers/all"
)

// kubeadmControllers is the --controllers value kubeadm gives kube-controller-manager:
// every default controller plus the bootstrap-token ones, which kubeadm's node join
// needs (bootstrapsigner signs kube-public/cluster-info for token discovery) and which
// "*" does not include.
var kubeadmControllers = []string{"*", "bootstrapsigner", "tokencleaner"}

// checkKubeControllerManagerControllers checks a --controllers value for the cluster's
// kube-controller-manager while mini-kcm runs: kubeadm's value, with every controller
// mini-kcm runs by default turned off (or two controllers would fight over the same
// objects), and nothing else turned on or off.
func checkKubeControllerManagerControllers(t *testing.T, value string) {
	t.Helper()
	entries := strings.Split(value, ",")
	for _, e := range kubeadmControllers {
		if !slices.Contains(entries, e) {
			t.Errorf("controllers=%q lacks kubeadm's %q", value, e)
		}
	}
	var off []string
	for _, e := range entries {
		if name, ok := strings.CutPrefix(e, "-"); ok {
			off = append(off, name)
		} else if !slices.Contains(kubeadmControllers, e) {
			t.Errorf("controllers=%q turns on %q, which kubeadm does not", value, e)
		}
	}
	var ours []string
	r := compiled.Registry()
	for _, name := range r.Names() {
		if d, _ := r.Get(name); !d.DisabledByDefault {
			ours = append(ours, name)
		}
	}
	slices.Sort(off)
	if !slices.Equal(off, ours) {
		t.Errorf("controllers=%q turns off %v, want exactly mini-kcm's %v", value, off, ours)
	}
}

// kindConfig is the part of kind's v1alpha4 Cluster the demo uses; strict decoding makes
// any other field a deliberate addition.
type kindConfig struct {
	Kind                 string     `json:"kind"`
	APIVersion           string     `json:"apiVersion"`
	Nodes                []kindNode `json:"nodes"`
	KubeadmConfigPatches []string   `json:"kubeadmConfigPatches"`
}

// demoKindScript is the kind demo, which checks the flag on the running
// kube-controller-manager.
const demoKindScript = "kind/demo.sh"

type kindNode struct {
	Role string `json:"role"`
}

// clusterConfigurationPatch covers both shapes of kubeadm's controllerManager.extraArgs:
// a map in v1beta3, a list of name/value pairs in v1beta4.
type clusterConfigurationPatch struct {
	APIVersion        string `json:"apiVersion"`
	Kind              string `json:"kind"`
	ControllerManager struct {
		ExtraArgs any `json:"extraArgs"`
	} `json:"controllerManager"`
}

// controllersArg returns the value of the "controllers" extra arg in either shape.
func (p clusterConfigurationPatch) controllersArg() (string, bool) {
	switch args := p.ControllerManager.ExtraArgs.(type) {
	case map[string]any:
		v, ok := args["controllers"].(string)
		return v, ok
	case []any:
		for _, a := range args {
			if pair, ok := a.(map[string]any); ok && pair["name"] == "controllers" {
				v, ok := pair["value"].(string)
				return v, ok
			}
		}
	}
	return "", false
}

func TestKindClusterLeavesTheControllersToMiniKCM(t *testing.T) {
	data, err := os.ReadFile(kindConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg kindConfig
	if err := utilyaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("%s: %v", kindConfigFile, err)
	}
	if cfg.Kind != "Cluster" || cfg.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Errorf("%s is a %s %s, want a kind.x-k8s.io/v1alpha4 Cluster", kindConfigFile, cfg.APIVersion, cfg.Kind)
	}
	var roles []string
	for _, n := range cfg.Nodes {
		roles = append(roles, n.Role)
	}
	if !slices.Equal(roles, []string{"control-plane", "worker", "worker"}) {
		t.Errorf("nodes = %v, want one control-plane and two workers: a node per replica", roles)
	}

	// Each kubeadm config version kind may render needs its own patch.
	versions, values := map[string]bool{}, map[string]bool{}
	for _, raw := range cfg.KubeadmConfigPatches {
		var p clusterConfigurationPatch
		if err := utilyaml.UnmarshalStrict([]byte(raw), &p); err != nil {
			t.Fatalf("kubeadm patch %q: %v", raw, err)
		}
		if p.Kind != "ClusterConfiguration" {
			continue
		}
		got, ok := p.controllersArg()
		if !ok {
			t.Errorf("the %s patch sets no controllers", p.APIVersion)
		}
		checkKubeControllerManagerControllers(t, got)
		values[got] = true
		versions[p.APIVersion] = true
	}
	if len(values) != 1 {
		t.Errorf("the patches set different values: %v", values)
	}
	// The install steps and the demo's check name the same value.
	for value := range values {
		for _, file := range []string{"README.md", demoKindScript} {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), "--controllers="+value) {
				t.Errorf("%s does not say --controllers=%s", file, value)
			}
		}
	}
	for _, v := range []string{"kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"} {
		if !versions[v] {
			t.Errorf("no ClusterConfiguration patch for %s", v)
		}
	}
}

func TestSampleServiceSelectsTheSampleDeploymentsPods(t *testing.T) {
	m := loadKustomization(t, "sample")
	deployment := only[*appsv1.Deployment](t, m)
	svc := only[*corev1.Service](t, m)
	ns := only[*corev1.Namespace](t, m)

	podLabels := labels.Set(deployment.Spec.Template.Labels)
	if !labels.SelectorFromSet(deployment.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("Deployment selector does not match its pod template")
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service selector %v does not select the Deployment's pods: no Endpoints to show", svc.Spec.Selector)
	}
	if deployment.Namespace != ns.Name || svc.Namespace != ns.Name {
		t.Errorf("sample objects are not all in namespace %s", ns.Name)
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.StrVal != "" && !slices.ContainsFunc(deployment.Spec.Template.Spec.Containers[0].Ports,
			func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.StrVal }) {
			t.Errorf("Service targetPort %q names no container port", p.TargetPort.StrVal)
		}
	}
	if deployment.Spec.Template.Spec.Containers[0].ReadinessProbe == nil {
		t.Errorf("sample pods have no readiness probe: Endpoints would list them before they serve")
	}
}
