package framework

import (
	"testing"
)

func TestParseMetricsReadsNamesLabelsAndValues(t *testing.T) {
	text := `# HELP leader_election_master_status [ALPHA] Gauge of if the reporting system is master of the relevant lease.
# TYPE leader_election_master_status gauge
leader_election_master_status{name="mini-kube-controller-manager"} 1
workqueue_adds_total{name="replicaset"} 42
workqueue_depth{name="deployment"} 0
weird{path="a\"b,c}",x="y"} 2.5e+01
process_start_time_seconds 1.7e+09
`
	m, err := ParseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leader_election_master_status", map[string]string{"name": "mini-kube-controller-manager"}, 1},
		{"workqueue_adds_total", map[string]string{"name": "replicaset"}, 42},
		{"workqueue_depth", nil, 0},
		{"weird", map[string]string{"path": `a"b,c}`, "x": "y"}, 25},
		{"process_start_time_seconds", nil, 1.7e9},
	}
	for _, tt := range tests {
		got, ok := m.Value(tt.name, tt.labels)
		if !ok || got != tt.want {
			t.Errorf("Value(%s, %v) = %v, %v; want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	if _, ok := m.Value("workqueue_adds_total", map[string]string{"name": "endpoints"}); ok {
		t.Error("found a series for a label value that is not there")
	}
}

func TestParseMetricsRejectsMalformedLines(t *testing.T) {
	for _, line := range []string{`x{a="b} 1`, `x{a=b} 1`, `x`, `x{a="b"}`, `x notanumber`} {
		if _, err := ParseMetrics(line); err == nil {
			t.Errorf("ParseMetrics(%q) accepted a malformed line", line)
		}
	}
}

func TestNamespaceNameIsValidAndUnique(t *testing.T) {
	a := namespaceName("TestSomething/with spaces_and_UPPER/" + "a-very-long-suffix-that-goes-on-and-on-and-on")
	b := namespaceName("TestSomething/with spaces_and_UPPER/" + "a-very-long-suffix-that-goes-on-and-on-and-on")
	if a == b {
		t.Fatalf("two calls gave the same name %q", a)
	}
	if len(a) > 63 {
		t.Fatalf("%q is longer than 63 characters", a)
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			t.Fatalf("%q contains %q", a, c)
		}
	}
}
