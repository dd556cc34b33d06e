package foundation

import (
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// This suite's apiserver runs without the ShardedListAndWatch gate: it ignores
// shardSelector, and mini-kcm must see that (test/e2e/sharding has the gate on).
func TestAnApiserverWithoutTheShardGateIsDetectedAsIgnoringIt(t *testing.T) {
	if framework.New(t).ServerFiltersByShard() {
		t.Error("an apiserver without ShardedListAndWatch was detected as filtering by shard")
	}
}

// A sharded replica on such an apiserver would cache, and act on, every shard's
// objects: it refuses to start and says how to fix it, rather than fall back to
// filtering on its side, which would cost every replica the whole cluster's memory.
func TestShardedReplicaRefusesAnApiserverThatIgnoresTheShardSelector(t *testing.T) {
	f := framework.New(t)
	res := framework.RunMiniKCM(t, 30*time.Second, "--kubeconfig="+f.ControlPlane.KubeconfigPath(), "--secure-port=0",
		"--shards=3", "--leader-elect-resource-name="+f.LeaseName)
	if res.ExitCode != 1 {
		t.Errorf("exit code %d, want 1; output:\n%s", res.ExitCode, res.Output)
	}
	for _, want := range []string{"this one ignores it", "--feature-gates=ShardedListAndWatch=true", "--shards=1"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output does not say %q:\n%s", want, res.Output)
		}
	}
}
