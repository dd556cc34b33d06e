package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The kubectl users run (the one built with the control plane, whose kustomize is
// kubectl v1.37's) builds every kustomization of deploy/ and every Component
// combination deploy/README.md names; deploy/'s unit tests check their content with
// kustomize's library at the same version.
func TestKubectlKustomizeBuildsEveryInstallAndComponentCombination(t *testing.T) {
	for _, dir := range []string{"deploy", "deploy/sharded", "deploy/static-pod", "deploy/static-pod/pod", "deploy/sample",
		"deploy/monitoring", "deploy/fence", "deploy/lease-scope", "deploy/sharded/fence"} {
		if out, err := kubectlErr(t, "kustomize", repoPath(t, dir)); err != nil {
			t.Errorf("kubectl kustomize %s: %v", dir, err)
		} else if !strings.Contains(out, "kind: ") {
			t.Errorf("kubectl kustomize %s built nothing", dir)
		}
	}
	for _, c := range []struct {
		resource   string
		components []string
		want       []string
	}{
		{"deploy", []string{"deploy/monitoring"}, []string{"kind: PodMonitor", "kind: PrometheusRule", "name: mini-kcm-lease-fence"}},
		{"deploy/sharded", []string{"deploy/monitoring"}, []string{"kind: PodMonitor", "name: mini-kcm-shard-fence-0"}},
		{"deploy/base", []string{"deploy/lease-scope", "deploy/monitoring"}, []string{"kind: StatefulSet", "name: mini-kcm-lease-scope"}},
	} {
		dir := t.TempDir()
		rel := func(p string) string {
			r, err := filepath.Rel(dir, repoPath(t, p))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel(c.resource) + "\ncomponents:\n"
		for _, comp := range c.components {
			k += "- " + rel(comp) + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := kubectlErr(t, "kustomize", dir)
		if err != nil {
			t.Errorf("kubectl kustomize of %s with %v: %v", c.resource, c.components, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl kustomize of %s with %v has no %q", c.resource, c.components, w)
			}
		}
	}
}
