package rollout

import (
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestComputeHashIsDeterministicAndSpreadsTemplates(t *testing.T) {
	seen := map[string]int{}
	for i := range 1000 {
		tmpl := template(fmt.Sprintf("registry/cats:v0.%d.0", i))
		h := ComputeHash(&tmpl, nil)
		if again := ComputeHash(new(template(fmt.Sprintf("registry/cats:v0.%d.0", i))), nil); again != h {
			t.Fatalf("hash of equal templates differs: %q vs %q", h, again)
		}
		if strings.Trim(h, "bcdfghjklmnpqrstvwxz2456789") != "" {
			t.Fatalf("hash %q uses characters outside the safe alphabet", h)
		}
		if prev, dup := seen[h]; dup {
			t.Fatalf("templates %d and %d collide on %q", prev, i, h)
		}
		seen[h] = i
	}
}

func TestComputeHashChangesWithCollisionCount(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{}
	one, two, maxCount := int32(1), int32(2), int32(math.MaxInt32)
	hashes := map[string]string{}
	for name, count := range map[string]*int32{"nil": nil, "1": &one, "2": &two, "max": &maxCount} {
		h := ComputeHash(&tmpl, count)
		if other, dup := hashes[h]; dup {
			t.Errorf("collision counts %s and %s give the same hash %q", name, other, h)
		}
		hashes[h] = name
	}
}

// TestComputeHashGolden pins the value for one template. The algorithm is upstream's, so
// a change here means our hashes no longer match kube-controller-manager's and every
// Deployment would get a new ReplicaSet after switching controllers.
func TestComputeHashGolden(t *testing.T) {
	tmpl := template("nginx:1.27")
	if got, want := ComputeHash(&tmpl, nil), "74f8f75d46"; got != want {
		t.Errorf("ComputeHash = %q, want %q", got, want)
	}
}

func TestReplicaSetName(t *testing.T) {
	tests := []struct{ deployment, hash, want string }{
		{"my-deployment", "abcde12345", "my-deployment-abcde12345"},
		{strings.Repeat("a", 242), "abcde12345", strings.Repeat("a", 242) + "-abcde12345"},
		{strings.Repeat("b", 250), "abcde12345", strings.Repeat("b", 242) + "-abcde12345"},
		// A hash too long to leave room is not truncated: the apiserver rejects the name.
		{strings.Repeat("d", 252), strings.Repeat("h", 252), strings.Repeat("d", 252) + "-" + strings.Repeat("h", 252)},
	}
	for _, tc := range tests {
		got := ReplicaSetName(tc.deployment, tc.hash)
		if got != tc.want {
			t.Errorf("ReplicaSetName(%d chars) = %d chars, want %d", len(tc.deployment), len(got), len(tc.want))
		}
		if len(tc.hash) < 20 && len(got) > validation.DNS1123SubdomainMaxLength {
			t.Errorf("name of %d chars exceeds the limit", len(got))
		}
	}
}
