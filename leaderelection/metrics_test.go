package leaderelection

import (
	"context"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// masterStatus reads leader_election_master_status{name} from the process's registry.
func masterStatus(t *testing.T, name string) (float64, bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "leader_election_master_status" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// A process that released the Lease and stays up (a sharded replica that handed a
// shard over) must not go on reporting it as held.
func TestReleasingTheLeaseSetsMasterStatusToZero(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer sigterm()
	cfg := testConfig(fake.NewClientset(), "me")
	cfg.Name = "master-status-test"

	leading := make(chan float64)
	done := runInBackground(ctx, cfg, func(ctx context.Context) error {
		v, _ := masterStatus(t, cfg.Name)
		leading <- v
		<-ctx.Done()
		return nil
	})
	if v := waitFor(t, leading, "leadership"); v != 1 {
		t.Errorf("leader_election_master_status = %v while leading, want 1", v)
	}
	sigterm()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if v, ok := masterStatus(t, cfg.Name); !ok || v != 0 {
		t.Errorf("leader_election_master_status = %v (reported: %v) after the release, want 0", v, ok)
	}
}
