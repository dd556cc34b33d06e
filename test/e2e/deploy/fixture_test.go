package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// Paths of the kustomizations under test, relative to this package.
const (
	deployDir = "../../../deploy"
	sampleDir = deployDir + "/sample"
)

// The names the manifests give mini-kcm's workload and identity; the tests read
// everything else (Lease, flags, roles) from the manifests themselves.
const (
	statefulSetName = "mini-kcm"
	containerName   = "mini-kcm"
	saNamespace     = "kube-system"
	saName          = "mini-kcm"
	// fieldManager owns what the tests apply, as "kubectl" would for kubectl apply.
	fieldManager = "mini-kcm-e2e"
)

// installation is deploy/ applied to the suite's control plane, and what a replica
// needs to run as the StatefulSet's pods would.
type installation struct {
	t         *testing.T
	f         *framework.Framework
	applier   *install.Applier
	manifests []install.Manifest
	// podArgs are the StatefulSet container's arguments without the pod-only ones
	// (serving address and port, in-cluster configuration).
	podArgs []string
	// leaseNamespace and leaseName are the Lease of the manifest's flags, the only one
	// the leader-election Role lets the ServiceAccount renew.
	leaseNamespace, leaseName string
	// kubeconfig authenticates with a token of the ServiceAccount.
	kubeconfig string
	// tokenClient uses kubeconfig.
	tokenClient kubernetes.Interface
}

// installMiniKCM applies deploy/ (again: server-side apply makes it a no-op when it is
// already there) and mints a ServiceAccount kubeconfig for this test.
func installMiniKCM(t *testing.T, f *framework.Framework) *installation {
	t.Helper()
	ctx := f.Context()
	manifests, err := install.LoadKustomization(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	applier, err := install.NewApplier(f.ControlPlane.RESTConfig(), fieldManager)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applier.Apply(ctx, manifests, install.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	containerArgs, err := install.ContainerArgs(manifests, statefulSetName, containerName)
	if err != nil {
		t.Fatal(err)
	}
	inst := &installation{t: t, f: f, applier: applier, manifests: manifests, podArgs: install.WithoutPodOnlyFlags(containerArgs)}
	var ok bool
	if inst.leaseNamespace, ok = install.FlagValue(containerArgs, "leader-elect-resource-namespace"); !ok {
		t.Fatal("the StatefulSet does not set --leader-elect-resource-namespace")
	}
	if inst.leaseName, ok = install.FlagValue(containerArgs, "leader-elect-resource-name"); !ok {
		t.Fatal("the StatefulSet does not set --leader-elect-resource-name")
	}

	inst.kubeconfig = filepath.Join(t.TempDir(), "mini-kcm-serviceaccount.kubeconfig")
	if err := install.ServiceAccountKubeconfig(ctx, f.Client, f.ControlPlane.KubeconfigPath(),
		saNamespace, saName, inst.kubeconfig, time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", inst.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.UserAgent = "mini-kcm-e2e-serviceaccount"
	// Dozens of access reviews in a row; client-go's default of 5 QPS would only
	// slow the test down.
	cfg.QPS, cfg.Burst = 100, 200
	if inst.tokenClient, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return inst
}

// startReplicas starts n replicas as the StatefulSet would run them: its container's
// flags (then extra, which override them) and the ServiceAccount's token. The election
// timings are the product's defaults, as the manifest leaves them.
func (inst *installation) startReplicas(n int, extra ...string) []*framework.Replica {
	return inst.startReplicasOf("", n, extra...)
}

// startReplicasOf is startReplicas with another mini-kcm binary ("" for the suite's).
func (inst *installation) startReplicasOf(binary string, n int, extra ...string) []*framework.Replica {
	// In a pod, serving delegates authentication and authorization with the in-cluster
	// configuration, the ServiceAccount's; here the same token's kubeconfig, so that
	// the manifests' RBAC must allow the delegation too.
	args := append(append([]string{}, inst.podArgs...), "--kubeconfig="+inst.kubeconfig,
		"--authentication-kubeconfig="+inst.kubeconfig, "--authorization-kubeconfig="+inst.kubeconfig)
	args = append(args, extra...)
	// The framework issues each replica a client certificate; an empty group list
	// makes it powerless, and the kubeconfigs above replace it anyway.
	replicas := inst.f.StartReplicas(n, framework.ReplicaOptions{Args: args, Groups: []string{}, Binary: binary})
	// The manifest's Lease is shared by every test of the suite, unlike the per-test
	// Lease the framework cleans up: stop this test's replicas, then delete it, so
	// that the next test does not wait for a dead holder's lease to expire. Cleanups
	// run last-in first-out, so this runs before the framework's.
	t := inst.t
	t.Cleanup(func() {
		for _, r := range replicas {
			r.Kill()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := inst.f.Client.CoordinationV1().Leases(inst.leaseNamespace).Delete(ctx, inst.leaseName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting lease %s/%s: %v", inst.leaseNamespace, inst.leaseName, err)
		}
	})
	return replicas
}

// waitForLeader waits until the manifest's Lease has a holder and exactly one of
// replicas reports that it leads.
func (inst *installation) waitForLeader(replicas []*framework.Replica, timeout time.Duration) *framework.Replica {
	t := inst.t
	t.Helper()
	var leader *framework.Replica
	framework.Eventually(t, timeout, func() error {
		holder, err := framework.LeaseHolder(inst.f.Context(), inst.f.Client, inst.leaseNamespace, inst.leaseName)
		if err != nil {
			return err
		}
		if holder == "" {
			return fmt.Errorf("lease %s/%s has no holder", inst.leaseNamespace, inst.leaseName)
		}
		var leaders []string
		for _, r := range replicas {
			if r.Exited() {
				continue
			}
			leads, err := r.IsLeader(inst.leaseName)
			if err != nil {
				return err
			}
			if leads {
				leader = r
				leaders = append(leaders, r.Name)
			}
		}
		if len(leaders) != 1 {
			return fmt.Errorf("lease held by %q; replicas that say they lead: [%s]", holder, strings.Join(leaders, ", "))
		}
		return nil
	})
	return leader
}
