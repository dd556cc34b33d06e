//go:build long

package sharding

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestLongANewClusterIsBalancedWithinAMinuteAtTheDefaults is the story of issue #25's
// "Balanced at the defaults", as a new user meets it: three replicas with --shards=6
// and otherwise default flags start on a cluster without tenants; then 60 tenant
// namespaces appear, each with a ReplicaSet of 5. The first cut was made before they
// existed, so one replica holds them all at first; the coordinator's first looks after
// the cut move the cuts. A minute after the tenants appeared every ReplicaSet is
// scaled to 10, and the pods created from then on are spread 1/3 ± 20% over the
// replicas (counted from the audit log). make test-long runs it (about two minutes).
func TestLongANewClusterIsBalancedWithinAMinuteAtTheDefaults(t *testing.T) {
	f := framework.New(t)
	replicas := f.StartReplicas(3, shardedArgs(shardCount))
	waitForFairShares(t, f, replicas, 2)

	appeared := time.Now()
	tenants := createTenants(t, f, 60, 5)
	waitForPods(t, f, tenants, 5)
	t.Logf("60 tenants with 5 pods each after %s; plan epoch %d", time.Since(appeared).Round(time.Second), activeEpoch(t, f).Number)
	time.Sleep(time.Until(appeared.Add(time.Minute)))
	from := time.Now()
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 10)
	}
	waitForPods(t, f, tenants, 10)

	events, err := framework.AuditLog(f.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	byReplica := map[string]int{}
	total := 0
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.Verb != "create" || e.ObjectRef == nil || e.ObjectRef.Resource != "pods" ||
			e.ObjectRef.Subresource != "" || e.Code() != 201 || !slices.Contains(tenants, e.ObjectRef.Namespace) ||
			e.RequestReceivedTimestamp.Before(from) || !strings.HasPrefix(e.By, "mini-kcm-replica-") {
			continue
		}
		byReplica[e.By]++
		total++
	}
	if total != 300 {
		t.Errorf("%d pods created after the scale, want 300", total)
	}
	share := float64(total) / 3
	t.Logf("pods created from a minute after the tenants appeared, by replica: %v (plan epoch %d)", byReplica, activeEpoch(t, f).Number)
	if len(byReplica) != 3 {
		t.Errorf("%d replicas created pods, want all 3: %v", len(byReplica), byReplica)
	}
	for r, n := range byReplica {
		if float64(n) < 0.8*share || float64(n) > 1.2*share {
			t.Errorf("%s created %d of %d pods, want %s", r, n, total, fmt.Sprintf("%.0f–%.0f (1/3 ± 20%%)", 0.8*share, 1.2*share))
		}
	}
	assertOneWriterAtATime(t, f, tenants)
}
