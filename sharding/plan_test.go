package sharding

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tenants returns n namespaces named like a multi-tenant cluster's, each with weight w.
func tenants(prefix string, n int, w int64) map[string]int64 {
	weights := map[string]int64{}
	for i := range n {
		weights[fmt.Sprintf("%s-%03d", prefix, i)] = w
	}
	return weights
}

// What the issue measured on the apiserver: equal ranges put tenant-000 … tenant-099
// into one shard of 8; a plan cut at the quantiles spreads them evenly.
func TestBalancedSpreadsNamesThatFNVCollapses(t *testing.T) {
	weights := tenants("tenant", 100, 10)
	equal := Equal(8).Loads(weights)
	if got := Imbalance(equal); got < 7.9 {
		t.Fatalf("equal ranges give loads %v (imbalance %.2f); the premise of Balanced is that they put all in one shard", equal, got)
	}
	balanced := Balanced(weights, 8)
	if err := balanced.Validate(); err != nil {
		t.Fatal(err)
	}
	loads := balanced.Loads(weights)
	// 100 namespaces over 8 shards: 12 or 13 each.
	for i, l := range loads {
		if l < 120 || l > 130 {
			t.Errorf("shard %d holds %d, want 120-130 (loads %v)", i, l, loads)
		}
	}
}

// A namespace that outweighs a fair share makes a shard of its own, and the others
// share the rest.
func TestBalancedGivesAHeavyNamespaceAShardOfItsOwn(t *testing.T) {
	weights := tenants("team", 20, 10)
	weights["team-007"] = 1000
	p := Balanced(weights, 4)
	loads := p.Loads(weights)
	heavy := p.Shard("team-007")
	if loads[heavy] != 1000 {
		t.Errorf("the heavy namespace shares shard %d with others: loads %v", heavy, loads)
	}
}

func TestFewerNamespacesThanShardsFallsBackToEqualRanges(t *testing.T) {
	p := Balanced(map[string]int64{"a": 1, "b": 1}, 4)
	if p.String() != Equal(4).String() {
		t.Errorf("plan %s, want the equal plan %s", p, Equal(4))
	}
	if got := Balanced(nil, 1); got.Shards() != 1 {
		t.Errorf("one shard: %s", got)
	}
}

func TestEqualCutsTheSpaceIntoEqualWidths(t *testing.T) {
	if got, want := Equal(2).String(), "0x8000000000000000"; got != want {
		t.Errorf("Equal(2) = %s, want %s", got, want)
	}
	if got, want := Equal(4).String(), "0x4000000000000000,0x8000000000000000,0xc000000000000000"; got != want {
		t.Errorf("Equal(4) = %s, want %s", got, want)
	}
}

// The plan and the apiserver's selectors agree: every namespace is matched by the
// selector of exactly the shard Plan.Shard names, with the library's own matcher
// (which does what the apiserver does when it filters).
func TestSelectorsMatchExactlyTheShardOfEachNamespace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	weights := map[string]int64{}
	for range 300 {
		weights[fmt.Sprintf("ns-%x", rng.Uint64())] = rng.Int64N(100)
	}
	for _, p := range []Plan{Balanced(weights, 5), Equal(3), {}} {
		for ns := range weights {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
			var matched []int
			for i := range p.Shards() {
				ok, err := p.Selector(i).Matches(pod)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					matched = append(matched, i)
				}
			}
			if len(matched) != 1 || matched[0] != p.Shard(ns) {
				t.Fatalf("plan %s: namespace %s (hash %016x) is matched by shards %v, Shard says %d", p, ns, Hash(ns), matched, p.Shard(ns))
			}
		}
	}
}

func TestSelectorIsTheApiserversSyntax(t *testing.T) {
	p := Plan{Cuts: []uint64{0x8000000000000000}}
	if got, want := p.Selector(0).String(), "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"; got != want {
		t.Errorf("Selector(0) = %s, want %s", got, want)
	}
	if got, want := p.Selector(1).String(), "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"; got != want {
		t.Errorf("Selector(1) = %s, want %s", got, want)
	}
}

func TestParseReadsWhatStringWritesAndRejectsTheRest(t *testing.T) {
	p := Balanced(tenants("tenant", 50, 1), 5)
	back, err := Parse(p.String())
	if err != nil || back.String() != p.String() {
		t.Errorf("Parse(%q) = %s, %v", p, back, err)
	}
	for _, bad := range []string{"0x10,0x05", "0x0", "12", "0xzz", "0x8000000000000000,"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// Whatever the weights and the number of shards, a balanced plan is valid, places each
// namespace in one shard, and is never worse balanced than equal ranges.
func FuzzBalanced(f *testing.F) {
	f.Add(uint64(1), uint8(4), uint8(30))
	f.Add(uint64(7), uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, seed uint64, shards, namespaces uint8) {
		n := int(shards%16) + 1
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		weights := map[string]int64{}
		for i := range int(namespaces) {
			weights[fmt.Sprintf("tenant-%03d", i+int(rng.Uint32N(1000)))] = rng.Int64N(1000)
		}
		p := Balanced(weights, n)
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		if p.Shards() != n {
			t.Fatalf("%d shards, want %d", p.Shards(), n)
		}
		if len(weights) >= n {
			if b, e := Imbalance(p.Loads(weights)), Imbalance(Equal(n).Loads(weights)); b > e+1e-9 {
				t.Errorf("balanced plan %s: imbalance %.3f, equal ranges %.3f", p, b, e)
			}
		}
	})
}

func TestTheProbeSelectorExcludesTheProbeNamespace(t *testing.T) {
	const probeNamespace = "default"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: "p"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "p"}}
	for _, p := range []Plan{{Cuts: []uint64{Hash(probeNamespace)}}} {
		sel := p.Selector(0)
		if ok, _ := sel.Matches(pod); ok {
			t.Errorf("%s matches the default namespace", sel)
		}
		if ok, _ := sel.Matches(other); !ok && Hash("kube-system") < Hash(probeNamespace) {
			t.Errorf("%s does not match kube-system", sel)
		}
	}
	if got := excluding(probeNamespace); got != (Plan{Cuts: []uint64{Hash(probeNamespace)}}).Selector(0).String() {
		t.Errorf("excluding(default) = %s", got)
	}
}

// A replica holds whole shards, so the imbalance that decides a new cut counts the
// lightest shard as well as the heaviest: both put a replica off its share.
func TestImbalanceIsTheLargestDeviationFromTheMeanOnEitherSide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loads []int64
		want  float64
	}{
		{"equal", []int64{10, 10, 10}, 1},
		{"empty", []int64{0, 0, 0}, 1},
		{"one 20% above", []int64{12, 9, 9}, 1.2},
		{"one 30% below, none far above", []int64{7, 11, 11, 11}, 1.3},
		{"the 30 000-pod run's last cut", []int64{3900, 3600, 3900, 5400, 6000, 7200}, 1.44},
		{"one of four holds everything", []int64{0, 40, 0, 0}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Imbalance(tc.loads); got < tc.want-1e-9 || got > tc.want+1e-9 {
				t.Errorf("Imbalance(%v) = %v, want %v", tc.loads, got, tc.want)
			}
		})
	}
}
