package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The Prometheus Operator's objects of monitoring/, as far as these tests read them.
type (
	podMonitor struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			JobLabel          string `json:"jobLabel"`
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			PodMetricsEndpoints []struct {
				Port   string `json:"port"`
				Scheme string `json:"scheme"`
				Path   string `json:"path"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	prometheusRule struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec ruleGroups `json:"spec"`
	}
	// ruleGroups is a Prometheus rule file, which is also the PrometheusRule's spec.
	ruleGroups struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
)

// loadMonitoring builds the monitoring Component and returns its PodMonitor and
// PrometheusRule.
func loadMonitoring(t *testing.T) (podMonitor, prometheusRule) {
	t.Helper()
	var pm podMonitor
	var rule prometheusRule
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(kustomizeBuild(t, "monitoring"))))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var kind struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &kind); err != nil {
			t.Fatal(err)
		}
		switch kind.Kind {
		case "PodMonitor":
			err = yaml.Unmarshal(doc, &pm)
		case "PrometheusRule":
			err = yaml.Unmarshal(doc, &rule)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if pm.Kind == "" || rule.Kind == "" {
		t.Fatal("deploy/monitoring has no PodMonitor or no PrometheusRule")
	}
	return pm, rule
}

// The PodMonitor scrapes the replicas of every in-cluster install on their HTTPS port,
// found through their pods, and names the job after the label the rules select.
func TestPodMonitorScrapesTheReplicasHTTPSPort(t *testing.T) {
	pm, rule := loadMonitoring(t)
	for _, dir := range []string{".", "sharded"} {
		sts := only[*appsv1.StatefulSet](t, loadKustomization(t, dir))
		pod := sts.Spec.Template
		if !slices.Equal(pm.Spec.NamespaceSelector.MatchNames, []string{sts.Namespace}) {
			t.Errorf("the PodMonitor looks in %v, want [%s]", pm.Spec.NamespaceSelector.MatchNames, sts.Namespace)
		}
		for k, v := range pm.Spec.Selector.MatchLabels {
			if pod.Labels[k] != v {
				t.Errorf("deploy/%s: the PodMonitor selects %s=%s, which the replicas' pods do not carry (%v)", dir, k, v, pod.Labels)
			}
		}
		job := pod.Labels[pm.Spec.JobLabel]
		if job == "" {
			t.Errorf("the PodMonitor's jobLabel %q is no label of the replicas' pods", pm.Spec.JobLabel)
		}
		for _, g := range rule.Spec.Groups {
			for _, r := range g.Rules {
				if !strings.Contains(r.Expr, `job="`+job+`"`) {
					t.Errorf("alert %s does not select job=%q, the job the PodMonitor's series carry: %s", r.Alert, job, r.Expr)
				}
			}
		}
		if len(pm.Spec.PodMetricsEndpoints) != 1 {
			t.Fatalf("the PodMonitor has %d endpoints, want 1", len(pm.Spec.PodMetricsEndpoints))
		}
		ep := pm.Spec.PodMetricsEndpoints[0]
		c := pod.Spec.Containers[0]
		securePort := mustFlag(t, c, "secure-port")
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return p.Name == ep.Port && strconv.Itoa(int(p.ContainerPort)) == securePort
		}) || ep.Scheme != "https" || ep.Path != "/metrics" {
			t.Errorf("the PodMonitor scrapes port %q over %s at %s; want the serving port's name over https at /metrics (ports %v)", ep.Port, ep.Scheme, ep.Path, c.Ports)
		}
	}
	if pm.Metadata.Namespace != "monitoring" || rule.Metadata.Namespace != "monitoring" {
		t.Errorf("the PodMonitor and the PrometheusRule are in %q and %q, want monitoring (where the NetworkPolicy admits scrapers from)",
			pm.Metadata.Namespace, rule.Metadata.Namespace)
	}
}

// runbookURL is where every alert's runbook_url points: its section of docs/runbooks.md
// on the project's main branch, by the anchor a Markdown renderer gives its heading.
const runbookURL = "https://github.com/mini-kcm/mini-kcm/blob/main/docs/runbooks.md#"

// The alerts the issue names are there, each with a severity and a runbook_url (the
// annotation Alertmanager's and Grafana's templates link) to a section of
// docs/runbooks.md, and every section there is an alert's.
func TestAlertsCarrySeveritiesAndRunbooks(t *testing.T) {
	_, rule := loadMonitoring(t)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		// Alert sections; the page's other sections ("Reading a replica's status") are
		// what several runbooks share.
		if name, ok := strings.CutPrefix(line, "## MiniKCM"); ok {
			name = "MiniKCM" + name
			sections[strings.ToLower(strings.TrimSpace(name))] = true
		}
	}
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s has severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s has no %s annotation", r.Alert, a)
				}
			}
			anchor := strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != runbookURL+anchor {
				t.Errorf("alert %s has runbook_url %q, want %q", r.Alert, got, runbookURL+anchor)
			}
			if !sections[anchor] {
				t.Errorf("docs/runbooks.md has no section \"## %s\"", r.Alert)
			}
			delete(sections, anchor)
		}
	}
	for s := range sections {
		t.Errorf("docs/runbooks.md has a section %q that is no alert's", s)
	}
	for _, want := range []string{"MiniKCMNoLeader", "MiniKCMLeadershipFlapping", "MiniKCMWritesFenced", "MiniKCMSyncStuck",
		"MiniKCMQueueBacklog", "MiniKCMShardUnserved", "MiniKCMNotScraped", "MiniKCMReplicaDown"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s among %v", want, alerts)
		}
	}
}

// metricName finds the metric names of a PromQL expression: identifiers followed by a
// label matcher, which every selector of the rules has (job="mini-kcm").
var metricName = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// Every metric the rules read is in docs/monitoring.md's table of the metrics the
// binary serves (test/e2e/node checks that table against a running binary's /metrics),
// or is Prometheus' own up.
func TestAlertsReadOnlyMetricsTheBinaryServes(t *testing.T) {
	_, rule := loadMonitoring(t)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			for _, m := range metricName.FindAllStringSubmatch(r.Expr, -1) {
				name := strings.TrimSuffix(m[1], "_bucket")
				if name == "up" {
					continue
				}
				if !bytes.Contains(doc, []byte("| `"+name)) && !bytes.Contains(doc, []byte(", `"+name)) {
					t.Errorf("alert %s reads %s, which docs/monitoring.md's metrics table does not list", r.Alert, name)
				}
			}
		}
	}
}

// The rules parse and type-check as Prometheus loads them: hack/tools/prometheus's
// checkrules, which is promtool check rules' parsing (Prometheus' own rulefmt and PromQL
// parser) without the service discoveries promtool builds, on the PrometheusRule's spec
// (a rule file's format).
func TestAlertingRulesParseAsPrometheusLoadsThem(t *testing.T) {
	_, rule := loadMonitoring(t)
	data, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "mini-kcm.rules.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./checkrules", file)
	cmd.Dir = filepath.Join("..", "hack", "tools", "prometheus")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./checkrules (in hack/tools/prometheus): %v\n%s", err, out)
	}
	t.Logf("checkrules:\n%s", out)
}

// serving-cert/, in deploy/ and deploy/sharded/, gives the replica the mounted
// certificate and key of the Secret mini-kcm-serving as its serving certificate, beside
// the flags and mounts the install already has.
func TestServingCertComponentServesTheMountedSecret(t *testing.T) {
	for _, entry := range []string{"deploy", "deploy/sharded"} {
		t.Run(entry, func(t *testing.T) {
			root := t.TempDir()
			copyDeploy(t, root)
			overlay := filepath.Join(root, "overlay")
			writeFile(t, filepath.Join(overlay, "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\n"+
				"kind: Kustomization\nresources:\n- ../"+entry+"\ncomponents:\n- ../deploy/serving-cert\n")
			plain := only[*appsv1.StatefulSet](t, loadKustomization(t, filepath.Join(root, entry)))
			sts := only[*appsv1.StatefulSet](t, loadKustomization(t, overlay))
			c := sts.Spec.Template.Spec.Containers[0]
			if !slices.Equal(c.Args[:len(plain.Spec.Template.Spec.Containers[0].Args)], plain.Spec.Template.Spec.Containers[0].Args) {
				t.Errorf("the component changed the install's flags: %v", c.Args)
			}
			var mount string
			for _, m := range c.VolumeMounts {
				for _, v := range sts.Spec.Template.Spec.Volumes {
					if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "mini-kcm-serving" && m.ReadOnly {
						mount = m.MountPath
					}
				}
			}
			if mount == "" {
				t.Fatalf("the Secret mini-kcm-serving is not mounted read-only: volumes %v, mounts %v",
					sts.Spec.Template.Spec.Volumes, c.VolumeMounts)
			}
			if got := mustFlag(t, c, "tls-cert-file"); got != mount+"/tls.crt" {
				t.Errorf("--tls-cert-file=%s, want the Secret's tls.crt at %s", got, mount)
			}
			if got := mustFlag(t, c, "tls-private-key-file"); got != mount+"/tls.key" {
				t.Errorf("--tls-private-key-file=%s, want the Secret's tls.key at %s", got, mount)
			}
		})
	}
}
