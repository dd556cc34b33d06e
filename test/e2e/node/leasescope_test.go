package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// otherComponentsLease is a Lease of another control-plane component that does not
// exist on the node (no cloud-controller-manager runs): the case RBAC cannot stop,
// since it authorizes a create before it reads the name.
const otherComponentsLease = "cloud-controller-manager"

// replicasServiceAccountConfig returns a client configuration with a token of the
// replicas' ServiceAccount, as `kubectl create token` mints it.
func replicasServiceAccountConfig(t *testing.T) *rest.Config {
	t.Helper()
	token := strings.TrimSpace(kubectl(t, "create", "token", "mini-kcm", "-n", leaseNamespace, "--duration=10m"))
	cfg := rest.AnonymousClientConfig(framework.ControlPlane(t).RESTConfig())
	cfg.BearerToken = token
	return cfg
}

// staticPodUserConfig returns a client configuration for the static pod's certificate
// user, mini-kcm.
func staticPodUserConfig(t *testing.T) *rest.Config {
	t.Helper()
	path, err := framework.ControlPlane(t).AddUser("system:mini-kcm")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertLeaseScope checks, with the replicas' own credentials, that the install's
// lease-scope policy refuses them another component's Lease: creating it is refused
// by the policy (RBAC would allow it), and the Lease does not exist afterwards. The
// apiserver enforces a policy a moment after it is created (it learns of policies
// through its informers), so a create that went through within the first seconds is
// undone and tried again; one that still goes through after 30 s fails the test.
func assertLeaseScope(t *testing.T, install string, cfg *rest.Config) {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin := framework.ControlPlane(t).Client().CoordinationV1().Leases(leaseNamespace)
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), otherComponentsLease, metav1.DeleteOptions{})
	})
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: otherComponentsLease, Namespace: leaseNamespace}}
	framework.EventuallyEvery(t, 30*time.Second, time.Second, func() error {
		_, err := client.CoordinationV1().Leases(leaseNamespace).Create(t.Context(), lease, metav1.CreateOptions{})
		switch {
		case err == nil:
			if err := admin.Delete(t.Context(), otherComponentsLease, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting the Lease %s/%s the replicas could create: %v", leaseNamespace, otherComponentsLease, err)
			}
			return fmt.Errorf("%s: the replicas created Lease %s/%s of another component", install, leaseNamespace, otherComponentsLease)
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mini-kcm-lease-scope"):
			return fmt.Errorf("%s: creating Lease %s/%s as the replicas failed with %v, want the lease-scope policy's refusal", install, leaseNamespace, otherComponentsLease, err)
		}
		t.Logf("%s: the replicas' create of Lease %s/%s was refused: %v", install, leaseNamespace, otherComponentsLease, err)
		return nil
	})
	if _, err := admin.Get(t.Context(), otherComponentsLease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s: reading Lease %s/%s after the refused create returned %v, want NotFound", install, leaseNamespace, otherComponentsLease, err)
	}
}

// assertFenceParametersUndeletable checks, with the sharded replicas' own credentials
// (whose Role may delete any Lease of kube-system, since RBAC can name neither the
// membership Leases nor a prefix), that the lease-scope policy refuses them a delete of
// the Leases the write fence reads as its parameters: the base Lease, the plan and
// every shard's. A missing parameter lets the fence's bindings admit every writer
// (parameterNotFoundAction: Allow), so such a delete would open a shard to anyone.
func assertFenceParametersUndeletable(t *testing.T, cfg *rest.Config) {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin := framework.ControlPlane(t).Client().CoordinationV1().Leases(leaseNamespace)
	names := []string{leaseName, sharding.PlanLeaseName(leaseName), sharding.ShardLeaseName(leaseName, 0)}
	framework.EventuallyEvery(t, time.Minute, time.Second, func() error {
		for _, name := range names {
			if _, err := admin.Get(t.Context(), name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("waiting for Lease %s/%s: %v", leaseNamespace, name, err)
			}
		}
		return nil
	})
	for _, name := range names {
		err := client.CoordinationV1().Leases(leaseNamespace).Delete(t.Context(), name, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mini-kcm-lease-scope") || !strings.Contains(err.Error(), "membership Leases") {
			t.Errorf("deleting Lease %s/%s as the replicas returned %v; want the lease-scope policy's refusal", leaseNamespace, name, err)
			continue
		}
		if _, err := admin.Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("Lease %s/%s after the refused delete: %v", leaseNamespace, name, err)
		}
		t.Logf("deploy/sharded/: the replicas' delete of Lease %s/%s was refused: %v", leaseNamespace, name, err)
	}
}
