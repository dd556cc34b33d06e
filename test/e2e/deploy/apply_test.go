package deploy

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestEveryManifestOfTheKustomizationAppliesServerSide: an operator runs
// `kubectl apply --server-side -k deploy/`. Every object of the kustomization is
// accepted by the apiserver's schema with strict field validation (a misspelt or
// misplaced field is an error, not silently dropped), is stored with the operator's
// field manager, and applying again changes nothing, so the manifests do not fight the
// apiserver's defaulting.
//
// The StatefulSet is stored but gets no pods: no StatefulSet controller runs on the
// local control plane. Its pods' part is played by processes in the other tests.
func TestEveryManifestOfTheKustomizationAppliesServerSide(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	files, err := install.KustomizationFiles(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	// The kustomization's own list, not a directory listing, is what kubectl applies;
	// a file dropped from it would go unnoticed by the operator and by this test alike,
	// so name the kinds the install cannot do without.
	manifests, err := install.LoadKustomization(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, m := range manifests {
		kinds[m.Object.GetKind()]++
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"Service", "StatefulSet", "PodDisruptionBudget"} {
		if kinds[kind] == 0 {
			t.Errorf("the kustomization (%v) has no %s", files, kind)
		}
	}

	applier, err := install.NewApplier(f.ControlPlane.RESTConfig(), fieldManager)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := applier.Apply(ctx, manifests, install.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, obj := range applied {
		m := manifests[i]
		if !managedByApply(obj, fieldManager) {
			t.Errorf("%s: stored without an Apply entry of field manager %q: %+v", m, fieldManager, obj.GetManagedFields())
		}
		t.Logf("applied %s", m)
	}

	again, err := applier.Apply(ctx, manifests, install.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, obj := range again {
		if before, after := applied[i].GetResourceVersion(), obj.GetResourceVersion(); before != after {
			t.Errorf("%s changed when applied a second time (resourceVersion %s -> %s): the manifest and the apiserver's defaults disagree",
				manifests[i], before, after)
		}
	}

	// The roles are what the ServiceAccount's permissions rest on: check that the
	// apiserver kept every rule as written (an unknown verb or a misplaced field would
	// have been rejected above; a rule list cut short would not).
	for _, m := range manifests {
		if kind := m.Object.GetKind(); kind != "ClusterRole" && kind != "Role" {
			continue
		}
		stored, err := applier.Get(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		want, _, _ := unstructured.NestedSlice(m.Object.Object, "rules")
		got, _, _ := unstructured.NestedSlice(stored.Object, "rules")
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Errorf("%s: stored rules %v, want %v", m, got, want)
		}
	}
}

// TestTheStatefulSetsPodsWouldBeAdmitted: no StatefulSet controller runs here, so the
// pods of the StatefulSet are created by hand from its template, as a server-side dry
// run (validated and admitted, not stored): the apiserver accepts them, and the
// Priority admission plugin grants system-cluster-critical in kube-system.
func TestTheStatefulSetsPodsWouldBeAdmitted(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	manifests, err := install.LoadKustomization(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	var sts appsv1.StatefulSet
	for _, m := range manifests {
		if m.Object.GetKind() == "StatefulSet" && m.Object.GetName() == statefulSetName {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, &sts); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
	}
	if sts.Name == "" {
		t.Fatalf("no StatefulSet %s in %s", statefulSetName, deployDir)
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet %s/%s has %v replicas, want 3", sts.Namespace, sts.Name, sts.Spec.Replicas)
	}
	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(),
			Spec:       *sts.Spec.Template.Spec.DeepCopy(),
		}
		pod.Name = fmt.Sprintf("%s-%d", sts.Name, i)
		pod.Namespace = sts.Namespace
		admitted, err := f.Client.CoreV1().Pods(sts.Namespace).Create(ctx, pod, metav1.CreateOptions{
			DryRun:          []string{metav1.DryRunAll},
			FieldValidation: metav1.FieldValidationStrict,
		})
		if err != nil {
			t.Fatalf("the apiserver does not admit pod %s/%s of the StatefulSet's template: %v", pod.Namespace, pod.Name, err)
		}
		if admitted.Spec.Priority == nil || *admitted.Spec.Priority < 2000000000 {
			t.Errorf("pod %s/%s was admitted with priority %v, want system-cluster-critical's 2000000000", pod.Namespace, pod.Name, admitted.Spec.Priority)
		}
	}
}

// TestTheStaticPodInstallApplies: the alternative install applies its RBAC
// (deploy/static-pod/) like the main one, and the apiserver accepts its pod manifest.
// The kubelet reads that file from disk on each control-plane node rather than through
// the API, so the pod goes through a server-side dry run: validated and admitted like a
// real pod, but not stored, where the scheduler would bind it to a fake node.
func TestTheStaticPodInstallApplies(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	applier, err := install.NewApplier(f.ControlPlane.RESTConfig(), fieldManager)
	if err != nil {
		t.Fatal(err)
	}
	rbac, err := install.LoadKustomization(filepath.Join(deployDir, "static-pod"))
	if err != nil {
		t.Fatal(err)
	}
	applied, err := applier.Apply(ctx, rbac, install.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, obj := range applied {
		subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		for _, s := range subjects {
			if s, ok := s.(map[string]any); ok && s["kind"] == "User" {
				users = append(users, fmt.Sprint(s["name"]))
			}
		}
	}
	if !slices.Contains(users, "system:mini-kcm") {
		t.Errorf("no binding of deploy/static-pod/ names the certificate user system:mini-kcm; users bound: %v", users)
	}

	// Rendered as README.md says: kubectl kustomize deploy/static-pod/pod/.
	pod, err := install.LoadKustomization(filepath.Join(deployDir, "static-pod", "pod"))
	if err != nil {
		t.Fatal(err)
	}
	dryRun, err := applier.Apply(ctx, pod, install.ApplyOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applier.Get(ctx, pod[0]); !apierrors.IsNotFound(err) {
		t.Errorf("after the dry run of %s, reading the pod returned %v, want NotFound", pod[0], err)
	}
	t.Logf("dry run accepted %s (uid %s, not stored)", pod[0], dryRun[0].GetUID())
}

// managedByApply reports whether manager owns fields of obj through server-side apply.
func managedByApply(obj *unstructured.Unstructured, manager string) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply
	})
}
