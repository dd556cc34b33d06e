package deploy

import (
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
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// kustomizations are the directories users apply with `kubectl apply -k`, and the two
// they are built from that hold manifests of their own (rbac/, fence/,
// sharded/lease-scope/ and sharded/fence/).
var kustomizations = []string{".", "base", "sharded", "static-pod", "sample", "fence", "rbac", "sharded/lease-scope", "sharded/fence"}

// defaultImage is the image the manifests name until an install overrides it.
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
		"static-pod": "kube-system", "fence": "kube-system", "rbac": "kube-system", "sample": "mini-kcm-demo",
		"sharded/lease-scope": "kube-system", "sharded/fence": "kube-system"}
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
				if strings.HasPrefix(object, "StatefulSet ") && !slices.Equal(imgs, []string{defaultImage}) {
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

// The image is set once: `kustomize edit set image` in base/ reaches deploy/ and
// deploy/sharded/, and an overlay of the user's own reaches whichever entry point it
// names. The static pod, no kustomize resource, names the same default image, so the
// one replacement README.md documents finds it.
func TestOneImageOverrideReachesEveryInstall(t *testing.T) {
	const image = "registry.example/mini-kcm:v1.2.3"
	// What `kustomize edit set image mini-kcm=registry.example/mini-kcm:v1.2.3` writes.
	const imagesField = "images:\n- name: mini-kcm\n  newName: registry.example/mini-kcm\n  newTag: v1.2.3\n"

	t.Run("set in base", func(t *testing.T) {
		deploy := copyDeploy(t, t.TempDir())
		kustomization := filepath.Join(deploy, "base", "kustomization.yaml")
		data, err := os.ReadFile(kustomization)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, kustomization, string(data)+imagesField)
		for _, entry := range []string{".", "sharded"} {
			dir := filepath.Join(deploy, entry)
			sts := only[*appsv1.StatefulSet](t, decodeBuild(t, dir, kustomizeBuild(t, dir)))
			if got := sts.Spec.Template.Spec.Containers[0].Image; got != image {
				t.Errorf("deploy/%s runs %s after setting the image in base/, want %s", entry, got, image)
			}
		}
	})
	t.Run("an overlay", func(t *testing.T) {
		root := t.TempDir()
		copyDeploy(t, root)
		for _, entry := range []string{"deploy", "deploy/sharded"} {
			overlay := filepath.Join(root, "overlay", filepath.Base(entry))
			writeFile(t, filepath.Join(overlay, "kustomization.yaml"),
				"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../"+entry+"\n"+imagesField)
			sts := only[*appsv1.StatefulSet](t, decodeBuild(t, overlay, kustomizeBuild(t, overlay)))
			if got := sts.Spec.Template.Spec.Containers[0].Image; got != image {
				t.Errorf("an overlay of %s runs %s, want %s", entry, got, image)
			}
		}
	})
	t.Run("the static pod", func(t *testing.T) {
		pod := podsUnderTest(t)["static pod"]
		if got := pod.Containers[0].Image; got != defaultImage {
			t.Errorf("%s names %s, want the image of the other installs, %s", staticPodFile, got, defaultImage)
		}
	})
}
