package foundation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestTheWriterChecksCatchShardsThatDoNotFilterTheirRange is the mutation test of the
// range filter (issue 31): the test above passes because every replica drops the other
// shards' objects that an apiserver ignoring shardSelector sends it. Here the replicas
// run a build whose filter admits everything (sharding's planted mutation
// "no-range-filter"), so every shard's controllers act on every tenant namespace, and
// the test above's checks must fail, naming a write to a namespace outside the writer's
// shard. Same flags as the test above, for the same reason.
func TestTheWriterChecksCatchShardsThatDoNotFilterTheirRange(t *testing.T) {
	f := framework.New(t)
	if f.ServerFiltersByShard() {
		t.Fatal("this suite's apiserver filters by shard; the test needs one that ignores shardSelector")
	}
	binary := framework.MiniKCMBinaryWithMutation(t, "no-range-filter")
	tenants := make([]string, 6)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("m%02d-%s", i, f.Namespace)
		createTenant(t, f, tenants[i], 3)
	}
	replicas := f.StartReplicas(3, framework.ReplicaOptions{Binary: binary, Args: []string{"--shards=6", framework.APIServerFenceFlag + "=false"}})
	for _, r := range replicas {
		framework.Eventually(t, 30*time.Second, func() error {
			if !strings.Contains(r.Logs(), "planted bug") {
				return fmt.Errorf("%s has not logged its planted bug: the linker did not set the mutation", r.Name)
			}
			return nil
		})
	}
	// Every tenant gets its pods, from whichever shards saw it first.
	framework.Eventually(t, time.Minute, func() error {
		for _, ns := range tenants {
			pods, err := f.Client.CoreV1().Pods(ns).List(f.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items) < 3 {
				return fmt.Errorf("namespace %s: %d pods, want at least 3", ns, len(pods.Items))
			}
		}
		return nil
	})

	// The audit log shows writes from shards whose range does not hold the namespace:
	// the check of every shard write against its holder's range must say so.
	var failures []string
	framework.Eventually(t, time.Minute, func() error {
		failures = framework.RecordFailures(t, func(tb testing.TB) {
			assertEachTenantWrittenByOneReplicaAtATime(tb, f, tenants, 3)
		})
		for _, msg := range failures {
			if strings.Contains(msg, "is outside shard") {
				return nil
			}
		}
		return fmt.Errorf("the checks did not find a write outside its shard's range; they found %d failures: %q", len(failures), failures)
	})
	t.Logf("the checks caught the planted bug with %d failures, the first: %s", len(failures), failures[0])
}
