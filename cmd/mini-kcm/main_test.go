package main

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/mini-kcm/mini-kcm/app"
)

// kubernetes_build_info as the binary's /metrics serves it: one series, carrying this
// build's version rather than component-base's unstamped placeholders.
func TestBuildInfoMetricCarriesThisBuildsVersion(t *testing.T) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []map[string]string
	for _, family := range families {
		if family.GetName() != "kubernetes_build_info" {
			continue
		}
		for _, m := range family.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			series = append(series, labels)
		}
	}
	if len(series) != 1 {
		t.Fatalf("kubernetes_build_info has %d series %v, want 1", len(series), series)
	}
	labels := series[0]
	info := app.Info()
	if labels["git_version"] != info.GitVersion || labels["git_commit"] != info.GitCommit || labels["major"] != info.Major {
		t.Errorf("labels %v, want git_version %q, git_commit %q and major %q", labels, info.GitVersion, info.GitCommit, info.Major)
	}
	for name, value := range labels {
		if strings.Contains(value, "$Format") {
			t.Errorf("label %s=%q is component-base's unstamped placeholder", name, value)
		}
	}
}
