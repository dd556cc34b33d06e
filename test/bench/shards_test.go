package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/mini-kcm/mini-kcm/sharding"
)

func TestPackageOfStripsTheFunctionFromItsImportPath(t *testing.T) {
	for function, want := range map[string]string{
		"runtime.mallocgc": "runtime",
		"k8s.io/apiserver/pkg/storage/cacher.(*Cacher).dispatchEvent": "k8s.io/apiserver/pkg/storage/cacher",
		"go.etcd.io/etcd/client/v3.(*kv).Do":                          "go.etcd.io/etcd/client/v3",
		"crypto/tls.(*Conn).Write":                                    "crypto/tls",
		"[kube-apiserver]":                                            "[kube-apiserver]",
	} {
		if got := packageOf(function); got != want {
			t.Errorf("packageOf(%q) = %q, want %q", function, got, want)
		}
	}
}

func TestParsePprofTopSumsFlatCPUByPackage(t *testing.T) {
	out := `File: kube-apiserver
Type: cpu
Duration: 10s, Total samples = 4s (40.00%)
Showing nodes accounting for 4s, 100% of 4s total
      flat  flat%   sum%        cum   cum%
     1.50s 37.50% 37.50%      1.50s 37.50%  runtime.memmove
     1s    25.00% 62.50%         2s 50.00%  runtime.mallocgc
     0.50s 12.50% 75.00%      3.50s 87.50%  k8s.io/apiserver/pkg/endpoints/handlers.createHandler
  1000ms   25.00%   100%      1000ms 25.00%  encoding/json.(*encodeState).string
`
	top := parsePprofTop(out, 2, 10)
	if top.Summary != "Duration: 10s, Total samples = 4s (40.00%)" {
		t.Errorf("summary %q", top.Summary)
	}
	if len(top.Functions) != 2 || !strings.HasSuffix(top.Functions[0], "runtime.memmove") {
		t.Errorf("functions %q", top.Functions)
	}
	if len(top.Packages) != 3 || top.Packages[0].Package != "runtime" || top.Packages[0].Seconds != 2.5 || top.Packages[0].Percent != 62.5 {
		t.Errorf("packages %+v", top.Packages)
	}
	if len(top.KubernetesCumulative) != 1 || !strings.HasSuffix(top.KubernetesCumulative[0], "handlers.createHandler") {
		t.Errorf("cumulative %q", top.KubernetesCumulative)
	}
}

func TestTenantNamespacesCrowdTogetherAndRandomOnesDoNot(t *testing.T) {
	tenants := namespaceNames("tenant", 100, 1)
	if tenants[0] != "tenant-000" || tenants[99] != "tenant-099" {
		t.Fatalf("tenant names %q … %q", tenants[0], tenants[99])
	}
	random := namespaceNames("random", 100, 1)
	if !slices.Equal(random, namespaceNames("random", 100, 1)) {
		t.Fatal("random names differ for the same seed")
	}
	// Six equal ranges of the hash space: the tenants fall into one, random names
	// into all six.
	used := func(names []string) int {
		seen := map[int]bool{}
		for _, ns := range names {
			seen[sharding.Equal(6).Shard(ns)] = true
		}
		return len(seen)
	}
	if got := used(tenants); got != 1 {
		t.Errorf("tenant-NNN fill %d of 6 equal shards, want 1", got)
	}
	if got := used(random); got != 6 {
		t.Errorf("random names fill %d of 6 equal shards, want 6", got)
	}
}

func TestIdentityInLogFindsTheElectionIdentity(t *testing.T) {
	line := `I1201 08:36:06.092036    9668 leaderelection.go:330] "Joining leader election" lease="kube-system/mini-kcm-bench" identity="vm_4643d193-0abd-4b90-8e33-dd99e012ae5e" leaseDuration="4s"`
	m := identityInLog.FindStringSubmatch(line)
	if m == nil || m[1] != "vm_4643d193-0abd-4b90-8e33-dd99e012ae5e" {
		t.Errorf("identity %q", m)
	}
}
