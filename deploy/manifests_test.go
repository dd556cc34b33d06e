// Package deploy holds mini-kcm's Kubernetes manifests. These tests decode every manifest
// into the typed API objects the apiserver would build from it and check what a reviewer
// would check by hand: the workload kind and replica count, the probes, the hardening,
// the RBAC, and the values that must agree across files (lease name, port, namespace).
// They need no cluster, so they run in `make test`.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Files that are manifests but not applied through a kustomization.
const (
	kindConfigFile = "kind/kind-config.yaml"
)

// staticPodDir is the kustomization that renders the static pod's manifest (README.md:
// kubectl kustomize deploy/static-pod/pod/ > /etc/kubernetes/manifests/mini-kcm.yaml).
const staticPodDir = "static-pod/pod"

// strictDecoder rejects unknown and duplicated fields, so a misspelt or misplaced field
// (readinessProbe one level too deep) fails here instead of being dropped by the apiserver.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// kustomization is the part of kustomization.yaml these manifests use; strict decoding
// turns any other field into a test failure, to be added here deliberately.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	// Components are directories of kind Component (fence/, lease-scope/, image/, ...).
	Components []string `json:"components"`
	// Images is image/'s transformer: the one image of every install.
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
		Digest  string `json:"digest"`
	} `json:"images"`
	// Patches are JSON patches of the sharded overlay (see sharded_test.go).
	Patches []struct {
		Path   string `json:"path"`
		Target struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
}

// kustomizeFiles returns the manifest files a kustomization directory applies, following
// directory resources recursively, as paths relative to the deploy directory.
func kustomizeFiles(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatalf("reading the kustomization of %s: %v", dir, err)
	}
	var k kustomization
	if err := utilyaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("decoding %s/kustomization.yaml: %v", dir, err)
	}
	var files []string
	for _, r := range append(k.Resources, k.Components...) {
		path := filepath.Join(dir, r)
		info, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%s/kustomization.yaml lists %q: %v", dir, r, err)
		}
		if info.IsDir() {
			files = append(files, kustomizeFiles(t, path)...)
			continue
		}
		files = append(files, filepath.Clean(path))
	}
	for _, p := range k.Patches {
		if p.Path != "" {
			files = append(files, filepath.Clean(filepath.Join(dir, p.Path)))
		}
	}
	return files
}

// manifests is the decoded content of one kustomization.
type manifests struct {
	objects []runtime.Object
}

// loadKustomization builds the kustomization in dir as `kubectl apply -k dir` does (see
// kustomizeBuild) and decodes every object it applies strictly.
func loadKustomization(t *testing.T, dir string) manifests {
	t.Helper()
	return decodeBuild(t, dir, kustomizeBuild(t, dir))
}

// decodeBuild decodes the YAML stream of a kustomize build, one typed object per
// document.
func decodeBuild(t *testing.T, dir string, stream []byte) manifests {
	t.Helper()
	var m manifests
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("splitting the build of %s into documents: %v", dir, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("the build of %s: %v\n%s", dir, err, doc)
		}
		m.objects = append(m.objects, obj)
	}
	return m
}

// only returns the single object of type T, failing unless there is exactly one.
func only[T runtime.Object](t *testing.T, m manifests) T {
	t.Helper()
	found := all[T](m)
	if len(found) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, found %d", zero, len(found))
	}
	return found[0]
}

func all[T runtime.Object](m manifests) []T {
	var found []T
	for _, o := range m.objects {
		if typed, ok := o.(T); ok {
			found = append(found, typed)
		}
	}
	return found
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func mustFlag(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	v, ok := flagValue(c.Args, name)
	if !ok {
		t.Fatalf("container %s does not set --%s", c.Name, name)
	}
	return v
}

func TestEveryManifestDecodesStrictlyIntoAKnownType(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			if m := loadKustomization(t, dir); len(m.objects) == 0 {
				t.Fatalf("kustomization %s applies nothing", dir)
			}
		})
	}
}

func TestEveryManifestIsAppliedByAKustomization(t *testing.T) {
	applied := map[string]bool{kindConfigFile: true}
	for _, dir := range append(kustomizations, components...) {
		for _, f := range kustomizeFiles(t, dir) {
			applied[filepath.ToSlash(f)] = true
		}
	}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(path) != ".yaml" || d.Name() == "kustomization.yaml" {
			return nil
		}
		if !applied[filepath.ToSlash(path)] {
			t.Errorf("%s is in no kustomization: add it to one, or remove it", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEverythingLivesInKubeSystem(t *testing.T) {
	for _, o := range loadKustomization(t, ".").objects {
		meta := o.(interface {
			GetNamespace() string
			GetName() string
		})
		switch o.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding,
			*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if meta.GetNamespace() != "" {
				t.Errorf("cluster-scoped %T %s has namespace %q", o, meta.GetName(), meta.GetNamespace())
			}
		default:
			if meta.GetNamespace() != "kube-system" {
				t.Errorf("%T %s is in namespace %q, want kube-system", o, meta.GetName(), meta.GetNamespace())
			}
		}
	}
}

func TestReplicasRunAsAParallelStatefulSetOfThree(t *testing.T) {
	m := loadKustomization(t, ".")
	if n := len(all[*appsv1.Deployment](m)) + len(all[*appsv1.ReplicaSet](m)); n != 0 {
		t.Fatalf("found %d Deployments/ReplicaSets: their pods would need the controllers mini-kcm replaces", n)
	}
	sts := only[*appsv1.StatefulSet](t, m)
	if sts.Spec.Replicas == nil {
		t.Errorf("replicas is unset (defaults to 1), want 3")
	} else if *sts.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *sts.Spec.Replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy = %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	selector := labels.SelectorFromSet(sts.Spec.Selector.MatchLabels)
	if !selector.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("selector %s does not match the pod template labels %v", selector, sts.Spec.Template.Labels)
	}

	svc := only[*corev1.Service](t, m)
	if sts.Spec.ServiceName != svc.Name || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("serviceName %q must name the headless Service (found %q, clusterIP %q)", sts.Spec.ServiceName, svc.Name, svc.Spec.ClusterIP)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the replicas", svc.Spec.Selector)
	}

	spread := sts.Spec.Template.Spec.TopologySpreadConstraints
	if !slices.ContainsFunc(spread, func(c corev1.TopologySpreadConstraint) bool {
		return c.TopologyKey == corev1.LabelHostname && c.MaxSkew == 1 &&
			c.LabelSelector != nil && labels.SelectorFromSet(c.LabelSelector.MatchLabels).Matches(labels.Set(sts.Spec.Template.Labels))
	}) {
		t.Errorf("no topology spread across %s selecting the replicas: %+v", corev1.LabelHostname, spread)
	}
	if sts.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q, want system-cluster-critical", sts.Spec.Template.Spec.PriorityClassName)
	}
}

func TestPodDisruptionBudgetKeepsTwoReplicas(t *testing.T) {
	m := loadKustomization(t, ".")
	pdb := only[*policyv1.PodDisruptionBudget](t, m)
	sts := only[*appsv1.StatefulSet](t, m)
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("maxUnavailable = %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if pdb.Spec.MinAvailable != nil {
		t.Errorf("minAvailable is set as well as maxUnavailable")
	}
	selector := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels)
	if !selector.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget selector %s does not select the replicas", selector)
	}
}

// podsUnderTest are the two ways mini-kcm runs: the StatefulSet's pod template and the
// static pod.
func podsUnderTest(t *testing.T) map[string]corev1.PodSpec {
	t.Helper()
	sts := only[*appsv1.StatefulSet](t, loadKustomization(t, "."))
	static := loadKustomization(t, staticPodDir)
	if len(static.objects) != 1 {
		t.Fatalf("%s must render exactly one Pod, renders %d objects", staticPodDir, len(static.objects))
	}
	pod := only[*corev1.Pod](t, static)
	return map[string]corev1.PodSpec{
		"statefulset": sts.Spec.Template.Spec,
		"static pod":  pod.Spec,
	}
}

func TestPodsRunUnprivileged(t *testing.T) {
	for name, spec := range podsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			psc := spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
				t.Errorf("pod securityContext.runAsNonRoot is not true")
			}
			if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
				t.Errorf("pod securityContext.runAsUser is unset or root")
			}
			if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod seccompProfile is not RuntimeDefault")
			}
			for _, c := range spec.Containers {
				sc := c.SecurityContext
				if sc == nil {
					t.Fatalf("container %s has no securityContext", c.Name)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
				}
				if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
				}
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("container %s is privileged", c.Name)
				}
				if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
					t.Errorf("container %s: capabilities = %+v, want drop [ALL] and no add", c.Name, sc.Capabilities)
				}
			}
		})
	}
}

func TestPodsRequestResourcesAndCapMemory(t *testing.T) {
	for name, spec := range podsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			for _, c := range spec.Containers {
				req, lim := c.Resources.Requests, c.Resources.Limits
				if req.Cpu().IsZero() || req.Memory().IsZero() {
					t.Errorf("container %s: requests = %v, want cpu and memory", c.Name, req)
				}
				if lim.Memory().IsZero() || lim.Memory().Cmp(*req.Memory()) < 0 {
					t.Errorf("container %s: memory limit %v must be set and at least the request %v", c.Name, lim.Memory(), req.Memory())
				}
			}
		})
	}
}

// GOMEMLIMIT leaves the Go runtime headroom below the container's memory limit: the
// cgroup counts the binary's file pages and page cache too, which the runtime does not.
func TestGoMemoryLimitIsAboutNinetyPercentOfTheContainerLimit(t *testing.T) {
	for name, spec := range podsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			c := spec.Containers[0]
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
			if i < 0 {
				t.Fatalf("container %s does not set GOMEMLIMIT", c.Name)
			}
			value, ok := strings.CutSuffix(c.Env[i].Value, "MiB")
			mib, err := strconv.ParseInt(value, 10, 64)
			if !ok || err != nil {
				t.Fatalf("GOMEMLIMIT=%q, want a number of MiB such as 460MiB", c.Env[i].Value)
			}
			limit := c.Resources.Limits.Memory().Value()
			if ratio := float64(mib<<20) / float64(limit); ratio < 0.85 || ratio > 0.95 {
				t.Errorf("GOMEMLIMIT=%s is %.0f%% of the memory limit %s, want about 90%%", c.Env[i].Value, 100*ratio, c.Resources.Limits.Memory())
			}
		})
	}
}

// servingPort resolves a probe's port, by number or by container port name.
func servingPort(t *testing.T, c corev1.Container, port intstr.IntOrString) int32 {
	t.Helper()
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, port.StrVal)
	return 0
}

func TestProbesHitHealthEndpointsOnTheServingPort(t *testing.T) {
	for name, spec := range podsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			c := spec.Containers[0]
			port := mustFlag(t, c, "secure-port")
			for _, probe := range []struct {
				kind  string
				probe *corev1.Probe
				path  string
			}{
				{"liveness", c.LivenessProbe, "/livez"},
				{"readiness", c.ReadinessProbe, "/readyz"},
			} {
				if probe.probe == nil || probe.probe.HTTPGet == nil {
					t.Errorf("no HTTP %s probe", probe.kind)
					continue
				}
				get := probe.probe.HTTPGet
				if get.Path != probe.path {
					t.Errorf("%s probe path = %q, want %q", probe.kind, get.Path, probe.path)
				}
				if get.Scheme != corev1.URISchemeHTTPS {
					t.Errorf("%s probe scheme = %q: mini-kcm serves HTTPS only", probe.kind, get.Scheme)
				}
				if got := servingPort(t, c, get.Port); port != strconv.Itoa(int(got)) {
					t.Errorf("%s probe port %d is not --secure-port=%s", probe.kind, got, port)
				}
			}
		})
	}
}

func TestGracePeriodCoversDrainAndLeaseRelease(t *testing.T) {
	// leaderelection's release is bounded by --leader-elect-renew-deadline: 2s by
	// default, 10s with upstream's timings, the longest a user is told to set.
	const leaseRelease = 10 * time.Second
	// app's servingShutdownTimeout: HTTPS requests in flight get this long to finish.
	const servingShutdown = 5 * time.Second
	for name, spec := range podsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			timeout, err := time.ParseDuration(mustFlag(t, spec.Containers[0], "controller-shutdown-timeout"))
			if err != nil {
				t.Fatalf("--controller-shutdown-timeout: %v", err)
			}
			if spec.TerminationGracePeriodSeconds == nil {
				t.Fatalf("terminationGracePeriodSeconds is unset")
			}
			grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
			if worst := timeout + leaseRelease + servingShutdown; grace <= worst {
				t.Errorf("terminationGracePeriodSeconds %s leaves no margin over the drain (%s), the lease release (%s) and serving's shutdown (%s): SIGKILL would cut them",
					grace, timeout, leaseRelease, servingShutdown)
			}
		})
	}
}

func TestStaticPodServesOnLoopbackBesideKubeControllerManager(t *testing.T) {
	spec := podsUnderTest(t)["static pod"]
	c := spec.Containers[0]
	if !spec.HostNetwork {
		t.Errorf("hostNetwork is false: a static pod must not depend on the pod network")
	}
	if addr := mustFlag(t, c, "bind-address"); addr != "127.0.0.1" {
		t.Errorf("--bind-address = %s on the host network, want 127.0.0.1", addr)
	}
	// Ports of kube-controller-manager, cloud-controller-manager and kube-scheduler.
	if port := mustFlag(t, c, "secure-port"); slices.Contains([]string{"10257", "10258", "10259"}, port) {
		t.Errorf("--secure-port=%s collides with a control-plane component on the host network", port)
	}
	// Without an in-cluster configuration, empty delegation kubeconfigs would turn
	// authentication off: everything but the health endpoints would answer 403.
	kubeconfig := mustFlag(t, c, "kubeconfig")
	for _, flag := range []string{"authentication-kubeconfig", "authorization-kubeconfig"} {
		if got := mustFlag(t, c, flag); got != kubeconfig {
			t.Errorf("--%s=%s, want the pod's --kubeconfig %s", flag, got, kubeconfig)
		}
	}
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if probe != nil && probe.HTTPGet != nil && probe.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("probe %s must target host 127.0.0.1, the only address served", probe.HTTPGet.Path)
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == kubeconfig && m.ReadOnly
	}) {
		t.Errorf("--kubeconfig=%s is not a read-only mount", kubeconfig)
	}
}
