package rbacgen

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/featuregate"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// throwaway is a controller that exists only in this test: what a new controller's
// package would export. Adding it to the registry is the one line a real addition adds
// to controllers/all.
func throwaway() controllers.Descriptor {
	return controllers.Descriptor{
		Name:    "podlabeler-controller",
		Aliases: []string{"podlabeler"},
		New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
			return throwawayController{}, 1, nil
		},
		NewOptions: func() controllers.Options { return &throwawayOptions{Workers: 5} },
		// An alpha controller: it runs only with its gate on.
		FeatureGates:         []controllers.FeatureGate{throwawayGate},
		RequiredFeatureGates: []featuregate.Feature{throwawayGate.Name},
		PodAnnotations:       []string{throwawayAnnotation},
		Rules: []controllers.Rule{{
			Why:   "patch to label the pods of a StatefulSet with their ordinal.",
			Group: "", Resources: []string{"pods"}, Verbs: []string{"patch"},
		}, {
			Group: "apps", Resources: []string{"statefulsets/status"}, Verbs: []string{"get"},
		}},
		Caches: []schema.GroupResource{{Resource: "pods"}, {Group: "apps", Resource: "statefulsets"}},
	}
}

var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// decode decodes every document of a generated manifest, strictly, as the apiserver would.
func decode(t *testing.T, f File) []runtime.Object {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(f.Content)))
	var objects []runtime.Object
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("deploy/%s does not decode: %v\n%s", f.Path, err, doc)
		}
		objects = append(objects, obj)
	}
	return objects
}

func generated(t *testing.T, files []File, path string) File {
	t.Helper()
	for _, f := range files {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("nothing generates deploy/%s", path)
	return File{}
}

func objectsOf[T runtime.Object](t *testing.T, f File) []T {
	t.Helper()
	var out []T
	for _, o := range decode(t, f) {
		if typed, ok := o.(T); ok {
			out = append(out, typed)
		}
	}
	return out
}

// Adding a controller is its package, one line in the registry and make generate: the
// generated RBAC gives it an account of its own bound to exactly its rules, the process
// lists and watches what it caches and may request its tokens, and the fence covers its
// writes and its identity. No other file is edited by hand.
func TestAThrowawayControllerIsCoveredByTheGeneratedRBACThroughTheRegistryAlone(t *testing.T) {
	reg, err := controllers.NewRegistry(append(all.Descriptors(), throwaway())...)
	if err != nil {
		t.Fatal(err)
	}
	files := Generate(reg, ShardedInstall{Shards: 3, LeaseNamespace: "kube-system", LeaseName: "kcm"})
	const account = "mini-kcm-podlabeler-controller"

	own := generated(t, files, "rbac/podlabeler-controller.yaml")
	if sa := objectsOf[*corev1.ServiceAccount](t, own); len(sa) != 1 || sa[0].Name != account || sa[0].Namespace != Namespace {
		t.Errorf("ServiceAccounts %v, want kube-system/%s", sa, account)
	}
	roles := objectsOf[*rbacv1.ClusterRole](t, own)
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets/status"}, Verbs: []string{"get"}},
	}
	if len(roles) != 1 || roles[0].Name != "mini-kcm:podlabeler-controller" || !equalRules(roles[0].Rules, wantRules) {
		t.Errorf("ClusterRoles %+v, want mini-kcm:podlabeler-controller with %+v", roles, wantRules)
	}
	bindings := objectsOf[*rbacv1.ClusterRoleBinding](t, own)
	if len(bindings) != 1 || bindings[0].RoleRef.Name != "mini-kcm:podlabeler-controller" ||
		!slices.Equal(bindings[0].Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: Namespace}}) {
		t.Errorf("ClusterRoleBindings %+v, want its role bound to its account", bindings)
	}
	if !strings.Contains(string(own.Content), "# patch to label the pods of a StatefulSet with their ordinal.") {
		t.Errorf("the rule's reason is not a comment of the generated file:\n%s", own.Content)
	}

	if k := string(generated(t, files, "rbac/kustomization.yaml").Content); !strings.Contains(k, "\n- podlabeler-controller.yaml\n") {
		t.Errorf("rbac/kustomization.yaml does not list the new controller's file:\n%s", k)
	}
	tokens := objectsOf[*rbacv1.Role](t, generated(t, files, "rbac/token-requests.yaml"))
	if len(tokens) != 1 || !slices.Contains(tokens[0].Rules[0].ResourceNames, account) {
		t.Errorf("token-requests %+v do not name %s", tokens, account)
	}
	process := objectsOf[*rbacv1.ClusterRole](t, generated(t, files, "rbac/controller-manager.yaml"))
	if len(process) != 1 || !slices.ContainsFunc(process[0].Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.APIGroups, []string{"apps"}) && slices.Contains(r.Resources, "statefulsets") &&
			slices.Equal(r.Verbs, []string{"list", "watch"})
	}) {
		t.Errorf("the process may not list and watch statefulsets, which the new controller caches: %+v", process)
	}

	policies := objectsOf[*admissionregistrationv1.ValidatingAdmissionPolicy](t, generated(t, files, "fence/policy.yaml"))
	if len(policies) != 1 {
		t.Fatalf("fence/policy.yaml holds %d policies", len(policies))
	}
	if !strings.Contains(policies[0].Spec.MatchConditions[0].Expression, "'system:serviceaccount:kube-system:"+account+"'") {
		t.Errorf("the fence does not match the new account: %s", policies[0].Spec.MatchConditions[0].Expression)
	}
	var fencesPods, fencesGet bool
	for _, rule := range policies[0].Spec.MatchConstraints.ResourceRules {
		fencesPods = fencesPods || slices.Equal(rule.APIGroups, []string{""}) && slices.Contains(rule.Resources, "pods")
		fencesGet = fencesGet || slices.Contains(rule.Resources, "statefulsets/status")
	}
	if !fencesPods || fencesGet {
		t.Errorf("the fence must match the new controller's writes (pods) and not its reads (statefulsets/status): %+v",
			policies[0].Spec.MatchConstraints.ResourceRules)
	}
	impersonation := generated(t, files, "fence/rbac.yaml")
	if !slices.ContainsFunc(objectsOf[*rbacv1.Role](t, impersonation), func(r *rbacv1.Role) bool {
		return slices.Equal(r.Rules[0].ResourceNames, []string{account}) && slices.Equal(r.Rules[0].Verbs, []string{"impersonate"})
	}) {
		t.Errorf("fence/rbac.yaml does not let %s impersonate itself", account)
	}
}

func equalRules(got, want []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(got, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
			slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.ResourceNames, b.ResourceNames)
	})
}

// Write then Check agree; removing the controller from the registry makes its file stale,
// which Check reports and Write removes.
func TestCheckReportsDriftAndStaleFilesAndWriteFixesThem(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"rbac", "fence", "sharded/fence", "base", "kind"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The sharded overlay's flags, which the sharded fence's bindings are written for,
	// and the files that hold kube-controller-manager's --controllers value.
	for _, rel := range append([]string{shardsPatchFile, baseStatefulSetFile}, upstreamControllersFiles...) {
		data, err := os.ReadFile(filepath.Join("..", "..", "deploy", rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withThrowaway := controllers.MustNewRegistry(append(all.Descriptors(), throwaway())...)
	if err := Check(withThrowaway, dir); err == nil || !strings.Contains(err.Error(), "deploy/rbac/podlabeler-controller.yaml is missing") {
		t.Errorf("Check on an empty directory = %v, want the missing files", err)
	}
	if err := Write(withThrowaway, dir); err != nil {
		t.Fatal(err)
	}
	if err := Check(withThrowaway, dir); err != nil {
		t.Errorf("Check right after Write: %v", err)
	}

	product := all.Registry()
	err := Check(product, dir)
	for _, want := range []string{"deploy/rbac/podlabeler-controller.yaml is generated by no registered controller",
		"deploy/rbac/kustomization.yaml differs", "deploy/kind/kind-config.yaml differs", "deploy/kind/demo.sh differs",
		"deploy/README.md differs"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check without the controller = %v, want %q", err, want)
		}
	}
	if err := Write(product, dir); err != nil {
		t.Fatal(err)
	}
	if err := Check(product, dir); err != nil {
		t.Errorf("Check after Write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "rbac", "podlabeler-controller.yaml")); !os.IsNotExist(err) {
		t.Errorf("the stale file is still there (%v)", err)
	}
}

// The registry refuses what would make the generated RBAC unsafe.
func TestRegistryRefusesUpstreamAccountNamesSharedAccountsAndWildcards(t *testing.T) {
	base := throwaway()
	for name, mutate := range map[string]func(d *controllers.Descriptor){
		"upstream's account name": func(d *controllers.Descriptor) { d.ServiceAccountName = "replicaset-controller" },
		"another's account":       func(d *controllers.Descriptor) { d.ServiceAccountName = "mini-kcm-replicaset-controller" },
		"wildcard verb": func(d *controllers.Descriptor) {
			d.Rules = []controllers.Rule{{Resources: []string{"pods"}, Verbs: []string{"*"}}}
		},
		"wildcard resource": func(d *controllers.Descriptor) {
			d.Rules = []controllers.Rule{{Resources: []string{"*"}, Verbs: []string{"get"}}}
		},
		"rule without verbs": func(d *controllers.Descriptor) { d.Rules = []controllers.Rule{{Resources: []string{"pods"}}} },
	} {
		d := base
		mutate(&d)
		if _, err := controllers.NewRegistry(append(all.Descriptors(), d)...); err == nil {
			t.Errorf("%s: NewRegistry accepted it", name)
		}
	}
}

// The sharded fence is written for the overlay's flags: one binding per shard Lease,
// each with that Lease as its parameter, and the controllers' accounts may send the
// shard Lease extra beside the holder.
func TestTheShardedFenceHasABindingPerShardLeaseOfTheOverlay(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"sharded", "base"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, baseStatefulSetFile), []byte(`        args:
        - --leader-elect-resource-namespace=kube-system
        - --leader-elect-resource-name=kcm
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shardsPatchFile), []byte(`- op: add
  path: /spec/template/spec/containers/0/args/-
  value: --shards=4
`), 0o644); err != nil {
		t.Fatal(err)
	}
	install, err := ReadShardedInstall(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ShardedInstall{Shards: 4, LeaseNamespace: "kube-system", LeaseName: "kcm"}); install != want {
		t.Fatalf("ReadShardedInstall = %+v, want %+v", install, want)
	}
	files := Generate(all.Registry(), install)
	bindings := objectsOf[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, generated(t, files, "sharded/fence/bindings.yaml"))
	if len(bindings) != 4 {
		t.Fatalf("%d bindings, want 4", len(bindings))
	}
	for i, b := range bindings {
		ref := b.Spec.ParamRef
		if b.Name != leaderelection.ShardFenceBindingName(i) || b.Spec.PolicyName != leaderelection.ShardFencePolicyName || ref == nil ||
			ref.Namespace != "kube-system" || ref.Name != "kcm-"+strconv.Itoa(i) ||
			ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionregistrationv1.AllowAction {
			t.Errorf("binding %d = %+v, want %s binding kube-system/kcm-%d, allowing while the Lease does not exist", i, b.Spec, leaderelection.ShardFencePolicyName, i)
		}
	}
	policies := objectsOf[*admissionregistrationv1.ValidatingAdmissionPolicy](t, generated(t, files, "sharded/fence/policy.yaml"))
	if len(policies) != 1 || policies[0].Name != leaderelection.ShardFencePolicyName || len(policies[0].Spec.Validations) != 2 {
		t.Fatalf("sharded/fence/policy.yaml holds %+v, want the policy %s with two validations", policies, leaderelection.ShardFencePolicyName)
	}
	rbac := generated(t, files, "sharded/fence/rbac.yaml")
	if !slices.ContainsFunc(objectsOf[*rbacv1.ClusterRole](t, rbac), func(r *rbacv1.ClusterRole) bool {
		return slices.Contains(r.Rules[0].Resources, "userextras/mini-kcm.io/lease") && slices.Contains(r.Rules[0].Resources, "userextras/mini-kcm.io/lease-holder")
	}) {
		t.Errorf("sharded/fence/rbac.yaml does not grant impersonating both extras")
	}

	if err := os.WriteFile(filepath.Join(dir, shardsPatchFile), []byte("value: --shards=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadShardedInstall(dir); err == nil {
		t.Errorf("ReadShardedInstall accepted an overlay with one shard")
	}
}
