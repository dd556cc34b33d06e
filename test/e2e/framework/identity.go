package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
)

// Every replica runs, unless its test says otherwise (ReplicaOptions.Groups), with the
// identities deploy/ ships: the process authenticates as the ServiceAccount
// kube-system/mini-kcm with a token of its own, bound by deploy/'s RBAC and nothing
// else, and each controller writes as its own ServiceAccount
// (--use-service-account-credentials, as the StatefulSet runs it), with a token the
// process requests for it. The suite applies deploy/rbac/, the process's
// ServiceAccount and bindings of deploy/base/ and the fence's RBAC (deploy/fence/,
// deploy/sharded/fence/) as they ship; what differs is named here:
//
//   - The shipped leader-election Role names the shipped Lease only; each test elects on
//     a Lease of its own, so the framework gives the ServiceAccount the same rules on
//     that Lease's name (leaseRole), for the test's length.
//   - A sharded replica needs deploy/sharded/'s Role (every Lease of kube-system), which
//     the suite applies the first time one starts, and keeps for the rest of the suite:
//     the ServiceAccount is one for every test.
//   - No Lease-scope policy (deploy/lease-scope/) runs here; the deploy and node
//     suites test it as shipped.
//
// All replicas share the ServiceAccount, so the apiserver's audit log names the same
// user for all of them. AuditLog tells them apart by their tokens' credential IDs, as
// the failover demo's timeline does: each replica's own token, and those its process
// requested for its controllers.

const (
	// ProcessServiceAccount is deploy/'s ServiceAccount of the process, in kube-system.
	ProcessServiceAccount = "mini-kcm"
	// shippedLeaseRole is deploy/rbac's leader-election Role.
	shippedLeaseRole = "mini-kcm:leader-election"
	// replicaTokenLifetime outlives the longest test (the soaks of make test-long).
	replicaTokenLifetime = 24 * time.Hour
)

// identities is the suite's record of the shipped identities.
var identities struct {
	mu sync.Mutex
	// applied records, per control plane, the shipped manifests applied to it (by
	// path) and the error, if any.
	applied map[*controlplane.ControlPlane]map[string]error
	// byCredential names, for the credential ID of each replica's token, the user
	// the tests know the replica by.
	byCredential map[string]string
}

// applyOnce applies the shipped manifests at paths to cp unless they were already.
func applyOnce(cp *controlplane.ControlPlane, paths ...string) error {
	identities.mu.Lock()
	defer identities.mu.Unlock()
	if identities.applied == nil {
		identities.applied = map[*controlplane.ControlPlane]map[string]error{}
	}
	done := identities.applied[cp]
	if done == nil {
		done = map[string]error{}
		identities.applied[cp] = done
	}
	key := fmt.Sprint(paths)
	if err, ok := done[key]; ok {
		return err
	}
	err := applyRepoManifests(cp, paths...)
	done[key] = err
	return err
}

// installShippedRBAC applies deploy/rbac/, deploy/base/'s ServiceAccount and bindings
// of the process, and deploy/fence/'s RBAC (each controller may impersonate itself with
// the lease-holder extra) to cp, once.
func installShippedRBAC(cp *controlplane.ControlPlane) error {
	return applyOnce(cp, "deploy/rbac", "deploy/base/serviceaccount.yaml", "deploy/base/rolebindings.yaml", "deploy/fence/rbac.yaml")
}

// installShardingRole applies deploy/sharded/'s Role of the shard Leases and its
// fence's RBAC (the shard Lease extra) to cp, once.
func installShardingRole(cp *controlplane.ControlPlane) error {
	return applyOnce(cp, "deploy/sharded/sharding-role.yaml", "deploy/sharded/fence/rbac.yaml")
}

// repoFile is the path of a file of the repository.
func repoFile(path string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, path), nil
}

// applyRepoManifests applies the kustomizations (directories) and files of the
// repository at paths, server-side, as an administrator.
func applyRepoManifests(cp *controlplane.ControlPlane, paths ...string) error {
	var manifests []install.Manifest
	for _, p := range paths {
		path, err := repoFile(p)
		if err != nil {
			return err
		}
		var loaded []install.Manifest
		if filepath.Ext(path) == "" {
			loaded, err = install.LoadKustomization(path)
		} else {
			loaded, err = install.LoadFile(path)
		}
		if err != nil {
			return fmt.Errorf("loading %s: %w", p, err)
		}
		manifests = append(manifests, loaded...)
	}
	applier, err := install.NewApplier(cp.RESTConfig(), "mini-kcm-e2e")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := applier.Apply(ctx, manifests, install.ApplyOptions{}); err != nil {
		return fmt.Errorf("applying %v: %w", paths, err)
	}
	return nil
}

// ShippedKubeconfig returns a new kubeconfig of the process's ServiceAccount, with a
// token of its own, whose requests AuditLog attributes to user. StartReplica makes one
// for each replica it gives the shipped identity; a test that routes a replica's
// traffic elsewhere (a proxy) makes one itself and passes it in ReplicaOptions.
func (f *Framework) ShippedKubeconfig(user string) string {
	f.t.Helper()
	return ShippedKubeconfig(f.t, f.ControlPlane, user)
}

// ShippedKubeconfig is Framework.ShippedKubeconfig for a control plane of the test's
// own: it applies deploy/'s RBAC to cp first, once. A replica run with it runs with
// --use-service-account-credentials=true, as the StatefulSet does.
func ShippedKubeconfig(tb testing.TB, cp *controlplane.ControlPlane, user string) string {
	tb.Helper()
	if err := installShippedRBAC(cp); err != nil {
		tb.Fatalf("applying deploy/'s RBAC: %v", err)
	}
	path := filepath.Join(cp.Dir(), user+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".kubeconfig")
	if err := install.ServiceAccountKubeconfig(tb.Context(), cp.Client(), cp.KubeconfigPath(),
		"kube-system", ProcessServiceAccount, path, replicaTokenLifetime); err != nil {
		tb.Fatal(err)
	}
	id, err := install.KubeconfigCredentialID(path)
	if err != nil {
		tb.Fatal(err)
	}
	identities.mu.Lock()
	defer identities.mu.Unlock()
	if identities.byCredential == nil {
		identities.byCredential = map[string]string{}
	}
	identities.byCredential[id] = user
	return path
}

// grantShippedLeaseRights gives the process's ServiceAccount what a replica started
// with args needs of its Leases beyond the shipped RBAC: the shipped leader-election
// rules on its Lease's name, or, sharded, deploy/sharded/'s Role.
func (f *Framework) grantShippedLeaseRights(args []string) {
	f.t.Helper()
	if shards, err := strconv.Atoi(lastValue(args, "--shards")); err == nil && shards > 0 {
		if err := installShardingRole(f.ControlPlane); err != nil {
			f.t.Fatalf("applying deploy/sharded/'s Role: %v", err)
		}
		return
	}
	if !boolFlag(args, "--leader-elect") {
		return
	}
	namespace, name := lastValue(args, "--leader-elect-resource-namespace"), lastValue(args, "--leader-elect-resource-name")
	key := namespace + "/" + name
	if slices.Contains(f.leaseRoles, key) {
		return
	}
	if err := f.leaseRole(namespace, name); err != nil {
		f.t.Fatalf("granting the shipped leader-election rules on Lease %s: %v", key, err)
	}
	f.leaseRoles = append(f.leaseRoles, key)
}

// leaseRole creates a copy of the shipped leader-election Role whose rules name the
// Lease namespace/name, bound to the process's ServiceAccount, and deletes both when
// the test ends.
func (f *Framework) leaseRole(namespace, name string) error {
	ctx := f.Context()
	shipped, err := f.Client.RbacV1().Roles("kube-system").Get(ctx, shippedLeaseRole, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the shipped Role kube-system/%s: %w", shippedLeaseRole, err)
	}
	rules := make([]rbacv1.PolicyRule, 0, len(shipped.Rules))
	for _, r := range shipped.Rules {
		r = *r.DeepCopy()
		if len(r.ResourceNames) > 0 {
			r.ResourceNames = []string{name}
		}
		rules = append(rules, r)
	}
	roleName := shippedLeaseRole + ":" + name
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: namespace}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ProcessServiceAccount, Namespace: "kube-system"}},
	}
	if _, err := f.Client.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := f.Client.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.Client.RbacV1().RoleBindings(namespace).Delete(ctx, roleName, metav1.DeleteOptions{})
		_ = f.Client.RbacV1().Roles(namespace).Delete(ctx, roleName, metav1.DeleteOptions{})
	})
	return nil
}

// AuditLog reads the control plane's audit log with each request of a replica of the
// shipped identity attributed to it: By is the user the test knows the replica by
// (its name, or the User of its options) for the requests made with its own token
// and with the tokens its process requested for its controllers; for every other
// request By is the authenticated user, as controlplane.ReadAuditLog sets it. The
// write judges read By, so that they judge every identity the product writes with.
func AuditLog(cp *controlplane.ControlPlane) ([]controlplane.AuditEvent, error) {
	events, err := cp.ReadAuditLog()
	if err != nil {
		return nil, err
	}
	identities.mu.Lock()
	byCredential := make(map[string]string, len(identities.byCredential))
	for id, user := range identities.byCredential {
		byCredential[id] = user
	}
	identities.mu.Unlock()
	// The tokens the replicas requested: a TokenRequest made with a replica's token
	// names the credential it issued.
	for _, e := range events {
		if user, ok := byCredential[e.CredentialID()]; ok && e.Verb == "create" && e.Resource() == "serviceaccounts/token" {
			if issued := e.Annotations[controlplane.IssuedCredentialIDAnnotation]; issued != "" {
				byCredential[issued] = user
			}
		}
	}
	for i := range events {
		if user, ok := byCredential[events[i].CredentialID()]; ok {
			events[i].By = user
		}
	}
	return events, nil
}
