package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// objectKey names an object in a build.
func objectKey(t *testing.T, o runtime.Object) string {
	t.Helper()
	obj, err := meta.Accessor(o)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%T %s/%s", o, obj.GetNamespace(), obj.GetName())
}

// The sharded overlay is deploy/ with --shards=6 appended to the StatefulSet's flags,
// the Role its Leases need (whose writes lease-scope/, in both installs, keeps to
// mini-kcm's own Leases) and its own fence (sharded/fence/) instead of deploy/fence/: of that,
// only the Roles that let each controller's account impersonate itself, the same
// objects in both; everything else is the base's, object for object.
func TestShardedOverlayIsTheBaseWithShardsAndTheShardFence(t *testing.T) {
	plain, sharded := loadKustomization(t, "."), loadKustomization(t, "sharded")
	fence := map[string]bool{}
	for _, o := range loadKustomization(t, "fence").objects {
		fence[objectKey(t, o)] = true
	}
	shardedObjects := map[string]runtime.Object{}
	for _, o := range sharded.objects {
		shardedObjects[objectKey(t, o)] = o
	}
	for _, o := range plain.objects {
		key := objectKey(t, o)
		got, ok := shardedObjects[key]
		delete(shardedObjects, key)
		switch {
		case fence[key] && ok && isSelfImpersonation(key):
			if !equality.Semantic.DeepEqual(got, o) {
				t.Errorf("the sharded fence's %s differs from deploy/fence/'s:\n%s", key, diff.Diff(o, got))
			}
		case fence[key] && ok:
			t.Errorf("the sharded install applies the fence's %s, whose policy binds the single leader's Lease", key)
		case fence[key]:
		case !ok:
			t.Errorf("the sharded install misses the base's %s", key)
		case key == objectKey(t, only[*appsv1.StatefulSet](t, plain)):
			want := o.DeepCopyObject().(*appsv1.StatefulSet)
			c := &want.Spec.Template.Spec.Containers[0]
			c.Args = append(c.Args, "--shards=6")
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("the sharded StatefulSet differs from the base's with --shards=6 appended:\n%s",
					diff.Diff(want, got))
			}
		case !equality.Semantic.DeepEqual(got, o):
			t.Errorf("the sharded install changes the base's %s:\n%s", key, diff.Diff(o, got))
		}
	}
	var added []string
	for key := range shardedObjects {
		added = append(added, key)
	}
	slices.Sort(added)
	want := []string{"*v1.ClusterRole /mini-kcm:shard-fence-bindings", "*v1.ClusterRole /mini-kcm:shard-lease-extras",
		"*v1.ClusterRoleBinding /mini-kcm:shard-fence-bindings", "*v1.ClusterRoleBinding /mini-kcm:shard-lease-extras",
		"*v1.Role kube-system/mini-kcm:sharding", "*v1.RoleBinding kube-system/mini-kcm:sharding",
		"*v1.ValidatingAdmissionPolicy /" + leaderelection.ShardFencePolicyName}
	for i := range 6 {
		want = append(want, fmt.Sprintf("*v1.ValidatingAdmissionPolicyBinding /%s-%d", leaderelection.ShardFencePolicyName, i))
	}
	if !slices.Equal(added, want) {
		t.Errorf("the sharded install adds %v, want %v", added, want)
	}
	if sts := only[*appsv1.StatefulSet](t, plain); sts.Spec.Template.Spec.Containers[0].Name != "mini-kcm" {
		t.Errorf("container 0 of the StatefulSet is %q, which the patch would change instead of mini-kcm", sts.Spec.Template.Spec.Containers[0].Name)
	}
}

// isSelfImpersonation tells the Roles and RoleBindings that let a controller's account
// impersonate itself, which both fences grant.
func isSelfImpersonation(key string) bool {
	return strings.Contains(key, " kube-system/mini-kcm:impersonate-self:")
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
