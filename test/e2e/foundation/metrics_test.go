package foundation

import (
	"fmt"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

func TestMetricsShowLeadershipAndNamedWorkqueues(t *testing.T) {
	f := framework.New(t)
	replicas := f.StartReplicas(2, framework.ReplicaOptions{})
	leader := f.WaitForLeader(30 * time.Second)

	for _, r := range replicas {
		want := 0.0
		if r == leader {
			want = 1
		}
		framework.Eventually(t, 10*time.Second, func() error {
			m, err := r.Metrics()
			if err != nil {
				return err
			}
			got, ok := m.Value("leader_election_master_status", map[string]string{"name": f.LeaseName})
			if !ok || got != want {
				return fmt.Errorf("%s: leader_election_master_status{name=%q} = %v (present %v), want %v",
					r.Name, f.LeaseName, got, ok, want)
			}
			return nil
		})
	}

	// The leader runs the controllers, whose queues carry upstream's names.
	framework.Eventually(t, 10*time.Second, func() error {
		m, err := leader.Metrics()
		if err != nil {
			return err
		}
		for _, queue := range []string{"replicaset", "deployment", "endpoint"} {
			for _, series := range []string{"workqueue_adds_total", "workqueue_depth", "workqueue_queue_duration_seconds_count"} {
				if _, ok := m.Value(series, map[string]string{"name": queue}); !ok {
					return fmt.Errorf("%s{name=%q} missing; workqueue series: %v", series, queue, m.Names("workqueue_"))
				}
			}
		}
		return nil
	})
}
