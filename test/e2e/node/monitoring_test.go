package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// operatorCRDs returns the Prometheus Operator's CRD files of the kinds deploy/monitoring
// uses, from the operator's Go module at the version hack/tools/prometheus-operator builds
// (example/prometheus-operator-crd/ of the module zip, through the Go module proxy or
// the module cache).
func operatorCRDs(t *testing.T, kinds ...string) []string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/prometheus-operator/prometheus-operator")
	cmd.Dir = repoPath(t, "hack/tools/prometheus-operator")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download of the Prometheus Operator (for its CRDs), in hack/tools/prometheus-operator: %v\n%s", err, out)
	}
	var module struct{ Dir, Version string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		t.Fatalf("go mod download -json said %s (%v)", out, err)
	}
	var files []string
	for _, kind := range kinds {
		path := filepath.Join(module.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("the Prometheus Operator %s has no CRD for %s: %v", module.Version, kind, err)
		}
		files = append(files, path)
	}
	t.Logf("Prometheus Operator CRDs of %s: %v", module.Version, kinds)
	return files
}

// installOperatorCRDs applies the operator's CRDs of kinds, waits until they are
// established and deletes them when the test ends.
func installOperatorCRDs(t *testing.T, kinds ...string) {
	t.Helper()
	crds := operatorCRDs(t, kinds...)
	for _, crd := range crds {
		kubectl(t, "apply", "--server-side", "-f", crd)
	}
	t.Cleanup(func() {
		for _, crd := range crds {
			if out, err := kubectlErr(t, "delete", "-f", crd, "--ignore-not-found", "--wait=true", "--timeout=1m"); err != nil {
				t.Logf("deleting the CRDs: %v\n%s", err, out)
			}
		}
	})
	names := []string{"--for=condition=Established", "--timeout=1m"}
	for _, kind := range kinds {
		names = append(names, "crd/"+kind+".monitoring.coreos.com")
	}
	kubectl(t, append([]string{"wait"}, names...)...)
}

// createNamespaceOnCleanupDelete creates the namespace and deletes it, waiting, when the
// test ends.
func createNamespaceOnCleanupDelete(t *testing.T, ns string) {
	t.Helper()
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() {
		if out, err := kubectlErr(t, "delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=2m"); err != nil {
			t.Logf("deleting the namespace %s: %v\n%s", ns, err, out)
		}
	})
}

// deploy/monitoring, the Component an overlay adds for clusters that run the
// Prometheus Operator, applies on a real apiserver with the operator's CRDs installed:
// the apiserver validates the PodMonitor and the PrometheusRule against the CRDs'
// schemas (kubectl's strict field validation refuses unknown fields), first in a
// server-side dry run as the README's steps do, then for real. Its grants then let
// Prometheus' ServiceAccount read /metrics and nothing else, and the status role read
// /statusz.
func TestTheMonitoringComponentAppliesWithTheOperatorsCRDs(t *testing.T) {
	installOperatorCRDs(t, "podmonitors", "prometheusrules")
	createNamespaceOnCleanupDelete(t, "monitoring")

	// The roles the Component binds come with every install (deploy/rbac/).
	rbac, monitoring := repoPath(t, "deploy/rbac"), repoPath(t, "deploy/monitoring")
	kubectl(t, "apply", "-k", rbac)
	t.Cleanup(func() {
		if out, err := kubectlErr(t, "delete", "-k", rbac, "--ignore-not-found"); err != nil {
			t.Logf("deleting deploy/rbac: %v\n%s", err, out)
		}
	})
	if out, err := kubectlErr(t, "apply", "-k", monitoring, "--dry-run=server"); err != nil {
		t.Fatalf("the server-side dry run of deploy/monitoring: %v", err)
	} else {
		t.Logf("kubectl apply -k deploy/monitoring --dry-run=server:\n%s", out)
	}
	kubectl(t, "apply", "-k", monitoring)
	t.Cleanup(func() {
		if out, err := kubectlErr(t, "delete", "-k", monitoring, "--ignore-not-found"); err != nil {
			t.Logf("deleting deploy/monitoring: %v\n%s", err, out)
		}
	})
	got := strings.Fields(kubectl(t, "get", "-n", "monitoring", "podmonitors,prometheusrules", "-o", "name"))
	slices.Sort(got)
	if want := []string{"podmonitor.monitoring.coreos.com/mini-kcm", "prometheusrule.monitoring.coreos.com/mini-kcm"}; !slices.Equal(got, want) {
		t.Errorf("the namespace monitoring holds %v, want %v", got, want)
	}
	alerts := kubectl(t, "get", "-n", "monitoring", "prometheusrule/mini-kcm", "-o", "jsonpath={.spec.groups[*].rules[*].alert}")
	t.Logf("alerts stored: %s", alerts)

	for _, c := range []struct {
		as, path string
		want     string
	}{
		{"system:serviceaccount:monitoring:prometheus", "/metrics", "yes"},
		{"system:serviceaccount:monitoring:prometheus", "/statusz", "no"},
		{"system:serviceaccount:monitoring:prometheus", "/debug/pprof/profile", "no"},
	} {
		out, _ := kubectlErr(t, "auth", "can-i", "get", c.path, "--as="+c.as)
		if got := strings.TrimSpace(out); got != c.want {
			t.Errorf("kubectl auth can-i get %s --as=%s = %q, want %q", c.path, c.as, got, c.want)
		}
	}
	out, _ := kubectlErr(t, "create", "clusterrolebinding", "mini-kcm-status-oncall", "--clusterrole=mini-kcm:status-reader",
		"--group=oncall", "--dry-run=server", "-o", "name")
	if !strings.Contains(out, "mini-kcm-status-oncall") {
		t.Errorf("binding mini-kcm:status-reader as docs/monitoring.md shows: %s", out)
	}
}

// metricsTableRow matches a row of docs/monitoring.md's metrics table and its first
// column, which lists one or more metric names in backquotes, each optionally followed
// by its labels in braces.
var metricsTableRow = regexp.MustCompile("^\\| *(`[a-z0-9_:]+(\\{[^}]*\\})?`(, *`[a-z0-9_:]+(\\{[^}]*\\})?`)*) *\\|")

// tableMetricName is one metric name of that column.
var tableMetricName = regexp.MustCompile("`([a-z0-9_:]+)")

// documentedMetrics returns the metric names of docs/monitoring.md's table.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(repoPath(t, "docs/monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		m := metricsTableRow.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		for _, name := range tableMetricName.FindAllStringSubmatch(m[1], -1) {
			names[name[1]] = true
		}
	}
	if len(names) == 0 {
		t.Fatal("docs/monitoring.md has no metrics table")
	}
	return names
}

// Every metric family the binary serves, besides Go's and the process's, is in
// docs/monitoring.md's table. The replica (the release binary of the node's image) leads
// a Lease of its own and reconciles a Deployment and a Service, so that the controllers'
// queues, syncs and API calls have been observed; families that exist only after rarer
// events (a fence refusal, a lost Lease) are in the table too but not required here.
func TestTheMetricsTableListsEveryMetricTheBinaryServes(t *testing.T) {
	binary, err := staticMiniKCM(t)
	if err != nil {
		t.Fatal(err)
	}
	f := framework.New(t)
	// Without the apiserver's fence: binding the suite's fence policy and removing the
	// binding when the test ends would leave kube-apiserver without the Lease watch
	// that the next deploy/ install's fence needs (kubernetes#130887; see
	// uninstallDeployOnCleanup). The metrics are the same.
	r := f.StartReplica(framework.ReplicaOptions{Binary: binary, Args: []string{framework.APIServerFenceFlag + "=false"}})
	r.WaitReady(t, 2*time.Minute)
	f.WaitForLeader(time.Minute)

	labels := map[string]string{"app": "metrics-table"}
	_, err = f.Client.AppsV1().Deployments(f.Namespace).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-table"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: sampleImage}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Client.CoreV1().Services(f.Namespace).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-table"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		d, err := f.Client.AppsV1().Deployments(f.Namespace).Get(t.Context(), "metrics-table", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation {
			return fmt.Errorf("the Deployment's status is not observed yet")
		}
		return nil
	})

	var served []string
	framework.Eventually(t, time.Minute, func() error {
		code, body, err := r.Get("/metrics")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /metrics: %d %v", code, err)
		}
		served = served[:0]
		for line := range strings.Lines(body) {
			if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
				served = append(served, strings.Fields(rest)[0])
			}
		}
		if !slices.Contains(served, "mini_kcm_controller_sync_total") {
			return fmt.Errorf("no sync observed yet")
		}
		return nil
	})
	documented := documentedMetrics(t)
	var missing []string
	for _, name := range served {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || documented[name] {
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) > 0 {
		t.Errorf("docs/monitoring.md's metrics table misses %d metrics the binary serves: %s", len(missing), strings.Join(missing, " "))
	}
	t.Logf("%d metric families served, %d documented in the table", len(served), len(documented))
}
