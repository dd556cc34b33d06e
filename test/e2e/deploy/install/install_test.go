package install

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mini-kcm/mini-kcm/controllers/all"
)

const deployDir = "../../../../deploy"

func TestKustomizationFilesFollowsDirectoriesInOrder(t *testing.T) {
	files, err := KustomizationFiles(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, f := range files {
		r, err := filepath.Rel(deployDir, f)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, r)
	}
	want := []string{"rbac/controller-manager.yaml", "rbac/leader-election-role.yaml", "rbac/token-requests.yaml",
		"rbac/serving.yaml"}
	// One generated file per registered controller, in name order (hack/rbacgen).
	for _, name := range all.Registry().Names() {
		want = append(want, "rbac/"+name+".yaml")
	}
	want = append(want, "base/serviceaccount.yaml",
		"base/rolebindings.yaml", "base/service.yaml", "base/statefulset.yaml", "base/poddisruptionbudget.yaml",
		"base/networkpolicy.yaml", "fence/policy.yaml", "fence/binding.yaml", "fence/rbac.yaml",
		"lease-scope/policy.yaml", "lease-scope/binding.yaml")
	if !slices.Equal(rel, want) {
		t.Errorf("files = %v, want %v", rel, want)
	}
}

func TestKustomizationFilesRejectsWhatItCannotApply(t *testing.T) {
	tests := map[string]string{
		"another kind":        "apiVersion: v1\nkind: ConfigMap\nresources: [a.yaml]\n",
		"a missing resource":  "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [missing.yaml]\n",
		"a missing component": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\ncomponents: [missing]\n",
	}
	for name, kustomization := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "kustomization.yaml"), kustomization)
			write(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: b}\n")
			if files, err := KustomizationFiles(dir); err == nil {
				t.Errorf("accepted %q, giving %v", kustomization, files)
			}
		})
	}
}

func TestLoadFileSkipsCommentOnlyDocumentsAndKeepsTheDocumentAsWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, "# a header comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: b\n  unknownField: kept\n---\n# trailing comment only\n")
	manifests, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(manifests) != 1 {
		t.Fatalf("got %d objects, want 1", len(manifests))
	}
	m := manifests[0]
	if m.Object.GetKind() != "ServiceAccount" || m.Object.GetName() != "a" || m.Object.GetNamespace() != "b" {
		t.Errorf("decoded %s", m)
	}
	// The apiserver, not this package, must see and reject an unknown field.
	if !strings.Contains(string(m.json), `"unknownField":"kept"`) {
		t.Errorf("the document sent would be %s, which lost a field of the file", m.json)
	}
}

func TestLoadFileRejectsAFileWithoutObjects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.yaml")
	write(t, path, "# nothing here\n")
	if _, err := LoadFile(path); err == nil {
		t.Error("accepted a file without objects")
	}
}

func TestContainerArgsReadsTheStatefulSetsFlags(t *testing.T) {
	manifests, err := LoadKustomization(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	args, err := ContainerArgs(manifests, "mini-kcm", "mini-kcm")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := FlagValue(args, "leader-elect-resource-name"); !ok || v != "mini-kube-controller-manager" {
		t.Errorf("--leader-elect-resource-name = %q, %v in %v", v, ok, args)
	}
	if _, err := ContainerArgs(manifests, "mini-kcm", "sidecar"); err == nil {
		t.Error("found args of a container that does not exist")
	}
}

func TestWithoutPodOnlyFlagsDropsServingAndKubeconfigFlagsOnly(t *testing.T) {
	got := WithoutPodOnlyFlags([]string{"--controllers=*", "--bind-address=0.0.0.0", "--secure-port=10257",
		"--kubeconfig=/in/pod", "--authentication-kubeconfig=/a", "--authorization-kubeconfig=/b", "--tls-cert-file=/c",
		"--tls-private-key-file=/d", "--cert-dir=/e", "--portal=x", "--v=2"})
	want := []string{"--controllers=*", "--portal=x", "--v=2"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestFlagValueReturnsTheLastValueAsPflagDoes(t *testing.T) {
	args := []string{"--port=1", "--portal=3", "--port=2"}
	if v, ok := FlagValue(args, "port"); !ok || v != "2" {
		t.Errorf("FlagValue(port) = %q, %v; want 2, true", v, ok)
	}
	if v, ok := FlagValue(args, "bind-address"); ok {
		t.Errorf("FlagValue(bind-address) = %q, true; want not found", v)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
