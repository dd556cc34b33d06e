package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// shardsPatchFile is the sharded overlay's JSON patch of the StatefulSet.
const shardsPatchFile = "sharded/shards-patch.yaml"

// The sharded overlay is deploy/ with --shards=6 appended to the StatefulSet's flags
// and the Role its Leases need; everything else is the base's.
func TestShardedOverlayAppendsShardsToTheBaseStatefulSet(t *testing.T) {
	var k kustomization
	data, err := os.ReadFile("sharded/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(k.Resources, "../statefulset.yaml") || slices.Contains(k.Resources, "../fence") || slices.Contains(k.Resources, "..") || len(k.Patches) != 1 {
		t.Fatalf("sharded/kustomization.yaml: resources %v, %d patches; want the base's files but fence/ (its policy binds the single leader's Lease), and one patch",
			k.Resources, len(k.Patches))
	}
	var base kustomization
	data, err = os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.UnmarshalStrict(data, &base); err != nil {
		t.Fatal(err)
	}
	for _, r := range base.Resources {
		if r != "fence" && !slices.Contains(k.Resources, "../"+r) {
			t.Errorf("the sharded overlay misses the base's %s", r)
		}
	}
	sts := only[*appsv1.StatefulSet](t, loadKustomization(t, "."))
	if p := k.Patches[0]; p.Target.Kind != "StatefulSet" || p.Target.Name != sts.Name || filepath.Join("sharded", p.Path) != shardsPatchFile {
		t.Errorf("patch %+v, want %s on StatefulSet %s", p, shardsPatchFile, sts.Name)
	}
	var ops []struct {
		Op, Path string
		Value    string
	}
	data, err = os.ReadFile(shardsPatchFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.UnmarshalStrict(data, &ops); err != nil {
		t.Fatal(err)
	}
	want := []struct{ Op, Path, Value string }{
		{"add", "/spec/template/spec/containers/0/args/-", "--shards=6"},
		{"add", "/spec/template/spec/containers/0/args/-", "--leader-elect-apiserver-fence=false"},
	}
	if len(ops) != 2 || ops[0] != want[0] || ops[1] != want[1] {
		t.Errorf("%s = %+v, want %+v", shardsPatchFile, ops, want)
	}
	if sts.Spec.Template.Spec.Containers[0].Name != "mini-kcm" {
		t.Errorf("container 0 of the StatefulSet is %q, which the patch would change instead of mini-kcm", sts.Spec.Template.Spec.Containers[0].Name)
	}
}

// shardingCalls are the sharded replica's Lease calls beyond the single leader's: the
// informer of the set's Leases, the membership Lease, the coordinator's plan and shard
// Leases, and the release of an expired shard.
func shardingCalls(namespace, lease string) []request {
	return []request{
		{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
		{verb: "watch", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease + "-member-0123456789abcdef"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease + "-member-0123456789abcdef"},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease + "-member-0123456789abcdef"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease + "-plan"},
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease + "-5"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease + "-5"},
		// The coordinator weighs the namespaces by their pods' metadata.
		{verb: "list", resource: "pods"},
	}
}

func TestShardedReplicasMayKeepTheirLeases(t *testing.T) {
	sts := only[*appsv1.StatefulSet](t, loadKustomization(t, "."))
	container := sts.Spec.Template.Spec.Containers[0]
	namespace := mustFlag(t, container, "leader-elect-resource-namespace")
	lease := mustFlag(t, container, "leader-elect-resource-name")
	r := loadRBAC(t, "sharded")
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sts.Spec.Template.Spec.ServiceAccountName, Namespace: sts.Namespace}
	for _, call := range append(leaderElectionCalls(namespace, lease), shardingCalls(namespace, lease)...) {
		if !r.allows(t, subject, call) {
			t.Errorf("the sharded install does not allow %s to %s", subject.Name, call)
		}
	}
	if r.allows(t, subject, request{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "default", name: lease + "-1"}) {
		t.Errorf("the sharded install lets %s write Leases outside %s", subject.Name, namespace)
	}
}
