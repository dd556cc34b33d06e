// Package sharding proves against the real apiserver what sharded mini-kcm (issue #17)
// stands on: with kube-apiserver's ShardedListAndWatch feature gate, lists filtered by
// the shard selectors of a plan (package app/shards) return exactly the objects of the
// namespaces the plan puts in each shard, and mini-kcm can tell an apiserver that
// filters from one that ignores the field.
package sharding

import (
	"os"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMain starts an apiserver-only control plane with the gate on.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, controlplane.Options{
		ExtraAPIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"},
	}))
}
