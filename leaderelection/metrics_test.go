package leaderelection

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

// A standby reports the Lease as not held, as client-go's elector does, so that
// dashboards see every candidate.
func TestAStandbyReportsMasterStatusZero(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	now := metav1.NewMicroTime(time.Now())
	held := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: "standby-status-test"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](60),
			AcquireTime: &now, RenewTime: &now},
	}
	cfg := testConfig(fake.NewClientset(held), "me")
	cfg.Name = held.Name
	done := runInBackground(ctx, cfg, func(context.Context) error {
		t.Error("run was called although another candidate holds the Lease")
		return nil
	})
	eventually(t, "the standby to report the Lease", func() bool { _, ok := masterStatus(t, cfg.Name); return ok })
	if v, _ := masterStatus(t, cfg.Name); v != 0 {
		t.Errorf("leader_election_master_status = %v on a standby, want 0", v)
	}
	cancel()
	waitFor(t, done, "Run to return")
}
