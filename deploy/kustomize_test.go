package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// kustomizations are the directories users apply with `kubectl apply -k` (or render,
// static-pod/pod/), and those they are built from that hold manifests of their own:
// rbac/ and the Components fence/, lease-scope/ and sharded/fence/ (kustomize builds a
// Component alone too). monitoring/, whose kinds are the Prometheus Operator's, has
// tests of its own (monitoring_test.go).
var kustomizations = []string{".", "base", "sharded", "static-pod", "static-pod/pod", "sample", "fence", "rbac", "lease-scope", "sharded/fence"}

// components are the optional pieces an overlay picks (README.md, "Components"): each
// is a kustomize Component.
var components = []string{"fence", "lease-scope", "sharded/fence", "monitoring", "serving-cert", "image"}

// defaultImage is the image the manifests name until image/ is set: image/'s newTag on
// the name mini-kcm.
const defaultImage = "mini-kcm:dev"

// kustomizeBuild builds the kustomization in dir with the kustomize library kubectl
// v1.37 builds `apply -k` with, and its defaults: files may only come from within the
// kustomization's own directory (another kustomization may be anywhere), no plugins.
// A reference that kubectl would refuse fails here.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kubectl apply -k %s would fail: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatalf("rendering the build of %s: %v", dir, err)
	}
	return out
}

// images returns every container image of the workloads in m, by object.
func images(m manifests) map[string][]string {
	found := map[string][]string{}
	for _, sts := range all[*appsv1.StatefulSet](m) {
		for _, c := range sts.Spec.Template.Spec.Containers {
			found["StatefulSet "+sts.Name] = append(found["StatefulSet "+sts.Name], c.Image)
		}
	}
	for _, d := range all[*appsv1.Deployment](m) {
		for _, c := range d.Spec.Template.Spec.Containers {
			found["Deployment "+d.Name] = append(found["Deployment "+d.Name], c.Image)
		}
	}
	return found
}

// Every kustomization builds with the real kustomize, applies into the namespace its
// install lives in, and runs the replicas from the one image.
func TestEveryKustomizationBuildsWithKustomize(t *testing.T) {
	wantNamespace := map[string]string{".": "kube-system", "base": "kube-system", "sharded": "kube-system",
		"static-pod": "kube-system", "static-pod/pod": "kube-system", "fence": "kube-system", "rbac": "kube-system",
		"sample": "mini-kcm-demo", "lease-scope": "kube-system", "sharded/fence": "kube-system"}
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			m := loadKustomization(t, dir)
			for _, o := range m.objects {
				obj, err := meta.Accessor(o)
				if err != nil {
					t.Fatal(err)
				}
				switch o.(type) {
				case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *corev1.Namespace,
					*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
					if obj.GetNamespace() != "" {
						t.Errorf("cluster-scoped %T %s has namespace %q", o, obj.GetName(), obj.GetNamespace())
					}
				default:
					if obj.GetNamespace() != wantNamespace[dir] {
						t.Errorf("%T %s is in namespace %q, want %q", o, obj.GetName(), obj.GetNamespace(), wantNamespace[dir])
					}
				}
			}
			for object, imgs := range images(m) {
				if !strings.HasPrefix(object, "Deployment ") && !slices.Equal(imgs, []string{defaultImage}) {
					t.Errorf("%s runs %v, want [%s]", object, imgs, defaultImage)
				}
			}
		})
	}
}

// The in-cluster installs run the same three replicas, both with the apiserver's fence:
// the default one binds deploy/fence/'s policy to its Lease, the sharded one adds
// --shards, the Role its Leases need and binds its own policy to each shard Lease.
func TestInClusterInstallsRunTheReplicasWithTheirFlags(t *testing.T) {
	for _, tc := range []struct {
		dir       string
		extraArgs []string
		fence     bool
		// shardFences is the number of bindings of the sharded fence.
		shardFences int
	}{
		{dir: ".", fence: true},
		{dir: "sharded", extraArgs: []string{"--shards=6"}, shardFences: 6},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			m := loadKustomization(t, tc.dir)
			sts := only[*appsv1.StatefulSet](t, m)
			if sts.Namespace != "kube-system" || sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
				t.Errorf("StatefulSet %s/%s with %v replicas, want kube-system/mini-kcm with 3", sts.Namespace, sts.Name, sts.Spec.Replicas)
			}
			c := sts.Spec.Template.Spec.Containers[0]
			want := append([]string{
				"--controllers=*",
				"--use-service-account-credentials=true",
				"--leader-elect=true",
				"--leader-elect-resource-namespace=kube-system",
				"--leader-elect-resource-name=mini-kube-controller-manager",
				"--leader-elect-apiserver-fence=true",
				"--bind-address=0.0.0.0",
				"--secure-port=10257",
				"--controller-shutdown-timeout=10s",
				"--v=2",
			}, tc.extraArgs...)
			if !slices.Equal(c.Args, want) {
				t.Errorf("args = %q,\nwant %q", c.Args, want)
			}
			fenceBindings, shardFenceBindings := 0, 0
			for _, b := range all[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](m) {
				switch b.Spec.PolicyName {
				case leaderelection.FencePolicyName:
					fenceBindings++
				case leaderelection.ShardFencePolicyName:
					shardFenceBindings++
				}
			}
			if got := fenceBindings == 1; got != tc.fence {
				t.Errorf("%d fence policy bindings, want the fence: %v", fenceBindings, tc.fence)
			}
			if shardFenceBindings != tc.shardFences {
				t.Errorf("%d sharded fence policy bindings, want %d", shardFenceBindings, tc.shardFences)
			}
			hasShardingRole := slices.ContainsFunc(all[*rbacv1.Role](m), func(r *rbacv1.Role) bool { return r.Name == "mini-kcm:sharding" })
			if wantRole := len(tc.extraArgs) > 0; hasShardingRole != wantRole {
				t.Errorf("the Role mini-kcm:sharding is there: %v, want %v", hasShardingRole, wantRole)
			}
		})
	}
}

// copyDeploy copies the manifests and kustomizations of deploy/ into dir/deploy, so
// that a test can edit them as a user would.
func copyDeploy(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, "deploy")
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(path)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, path), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The image is set once: what `make deploy-image IMAGE=...` (kustomize edit set image,
// in image/) writes reaches deploy/, deploy/sharded/ and the static pod's rendering;
// an overlay of the user's own that sets it reaches whichever entry point it names.
func TestOneImageSettingReachesEveryInstall(t *testing.T) {
	const image = "registry.example/mini-kcm:v0.0.0-master_0123456789ab"
	// What `kustomize edit set image mini-kcm=registry.example/mini-kcm:v0.0.0-master_0123456789ab`
	// writes (checked with kustomize v5.8.1).
	const imagesField = "images:\n- name: mini-kcm\n  newName: registry.example/mini-kcm\n  newTag: v0.0.0-master_0123456789ab\n"
	entries := []string{".", "sharded", staticPodDir}

	t.Run("the Component image/", func(t *testing.T) {
		deploy := copyDeploy(t, t.TempDir())
		component := filepath.Join(deploy, "image", "kustomization.yaml")
		data, err := os.ReadFile(component)
		if err != nil {
			t.Fatal(err)
		}
		before, _, ok := strings.Cut(string(data), "images:")
		if !ok {
			t.Fatalf("image/kustomization.yaml has no images: field")
		}
		writeFile(t, component, before+imagesField)
		for _, entry := range entries {
			dir := filepath.Join(deploy, entry)
			for object, imgs := range workloadImages(t, decodeBuild(t, dir, kustomizeBuild(t, dir))) {
				if !slices.Equal(imgs, []string{image}) {
					t.Errorf("deploy/%s: %s runs %v after setting image/, want [%s]", entry, object, imgs, image)
				}
			}
		}
	})
	t.Run("an overlay", func(t *testing.T) {
		root := t.TempDir()
		copyDeploy(t, root)
		for _, entry := range entries {
			overlay := filepath.Join(root, "overlay", strings.ReplaceAll(filepath.Join("deploy", entry), "/", "-"))
			writeFile(t, filepath.Join(overlay, "kustomization.yaml"),
				"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../deploy/"+entry+"\n"+imagesField)
			for object, imgs := range workloadImages(t, decodeBuild(t, overlay, kustomizeBuild(t, overlay))) {
				if !slices.Equal(imgs, []string{image}) {
					t.Errorf("an overlay of deploy/%s: %s runs %v, want [%s]", entry, object, imgs, image)
				}
			}
		}
	})
}

// workloadImages is images of the StatefulSet and of the static Pod, failing when m
// runs neither.
func workloadImages(t *testing.T, m manifests) map[string][]string {
	t.Helper()
	found := images(m)
	for _, p := range all[*corev1.Pod](m) {
		for _, c := range p.Spec.Containers {
			found["Pod "+p.Name] = append(found["Pod "+p.Name], c.Image)
		}
	}
	if len(found) == 0 {
		t.Fatal("the build runs no StatefulSet and no Pod")
	}
	return found
}

// Every optional piece is a kustomize Component (kind Component, apiVersion
// kustomize.config.k8s.io/v1alpha1), so that an overlay picks it with components:
// rather than by editing resources lists; and every combination README.md names builds.
func TestOptionalPiecesAreComponentsAndEveryCombinationBuilds(t *testing.T) {
	for _, dir := range components {
		data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k kustomization
		if err := utilyaml.UnmarshalStrict(data, &k); err != nil {
			t.Fatalf("%s/kustomization.yaml: %v", dir, err)
		}
		if k.Kind != "Component" || k.APIVersion != "kustomize.config.k8s.io/v1alpha1" {
			t.Errorf("%s is a %s %s, want a kustomize.config.k8s.io/v1alpha1 Component", dir, k.APIVersion, k.Kind)
		}
	}
	// The combinations of README.md, "Components": each entry point as shipped, with
	// monitoring/ added, and the single-leader install without the apiserver's fence.
	for _, tc := range []struct {
		entry      string
		components []string
		// policies are the ValidatingAdmissionPolicies the build must hold.
		policies []string
		kinds    []string
	}{
		{entry: "deploy", components: []string{"monitoring"},
			policies: []string{"mini-kcm-lease-fence", "mini-kcm-lease-scope"}, kinds: []string{"PodMonitor", "PrometheusRule"}},
		{entry: "deploy/sharded", components: []string{"monitoring"},
			policies: []string{"mini-kcm-shard-fence", "mini-kcm-lease-scope"}, kinds: []string{"PodMonitor", "PrometheusRule"}},
		{entry: "deploy", components: []string{"monitoring", "serving-cert"},
			policies: []string{"mini-kcm-lease-fence", "mini-kcm-lease-scope"}, kinds: []string{"PodMonitor", "PrometheusRule"}},
		{entry: "deploy/sharded", components: []string{"monitoring", "serving-cert"},
			policies: []string{"mini-kcm-shard-fence", "mini-kcm-lease-scope"}, kinds: []string{"PodMonitor", "PrometheusRule"}},
		{entry: "deploy/base", components: []string{"lease-scope"}, policies: []string{"mini-kcm-lease-scope"}},
		{entry: "deploy/base", components: []string{"lease-scope", "monitoring"},
			policies: []string{"mini-kcm-lease-scope"}, kinds: []string{"PodMonitor", "PrometheusRule"}},
	} {
		name := tc.entry + "+" + strings.Join(tc.components, "+")
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			copyDeploy(t, root)
			overlay := filepath.Join(root, "overlay")
			var b strings.Builder
			b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../" + tc.entry + "\ncomponents:\n")
			for _, c := range tc.components {
				b.WriteString("- ../deploy/" + c + "\n")
			}
			writeFile(t, filepath.Join(overlay, "kustomization.yaml"), b.String())
			objects := kindsAndNames(t, kustomizeBuild(t, overlay))
			for _, kind := range tc.kinds {
				if len(objects[kind]) == 0 {
					t.Errorf("the build of %s has no %s", name, kind)
				}
			}
			for _, policy := range tc.policies {
				if !slices.Contains(objects["ValidatingAdmissionPolicy"], policy) {
					t.Errorf("the build of %s has no ValidatingAdmissionPolicy %s, only %v", name, policy, objects["ValidatingAdmissionPolicy"])
				}
			}
		})
	}
}

// kindsAndNames lists the objects of a kustomize build by kind, without decoding them
// into types (the Prometheus Operator's kinds have none here).
func kindsAndNames(t *testing.T, build []byte) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(build)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return found
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := utilyaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "" {
			found[obj.Kind] = append(found[obj.Kind], obj.Metadata.Name)
		}
	}
}
