package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// deploy/static-pod as its README says: the RBAC applied with kubectl, the pod
// manifest rendered with `kubectl kustomize deploy/static-pod/pod/` (from an overlay
// that sets the image, as for the other installs) into the kubelet's staticPodPath,
// with its kubeconfig on the node. The only other change is the kubeconfig's host
// path, which points into the run's directory instead of /etc/kubernetes.
func TestStaticPodTakesTheLeaseAndReconciles(t *testing.T) {
	importImages(t)
	cp := framework.ControlPlane(t)
	installDeploy(t, "deploy/static-pod")
	// Before NodeKubeconfig below, which writes the same user's kubeconfig file.
	staticPodUser := staticPodUserConfig(t)

	pod := renderStaticPod(t)
	kubeconfig, err := cp.NodeKubeconfig("system:mini-kcm")
	if err != nil {
		t.Fatal(err)
	}
	// As the README's install steps: readable by the pod's user only.
	if err := os.Chown(kubeconfig, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(kubeconfig, 0o400); err != nil {
		t.Fatal(err)
	}
	patched := 0
	for i := range pod.Spec.Volumes {
		if hp := pod.Spec.Volumes[i].HostPath; hp != nil && strings.HasPrefix(hp.Path, "/etc/kubernetes/") {
			hp.Path = kubeconfig
			patched++
		}
	}
	if got := pod.Spec.Containers[0].Image; got != miniKCMImage {
		t.Fatalf("the static pod rendered from an overlay setting the image runs %s, want %s", got, miniKCMImage)
	}
	if patched != 1 {
		t.Fatalf("the static pod has %d hostPath volumes under /etc/kubernetes, want 1 (its kubeconfig)", patched)
	}
	manifest, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cp.StaticPodDir(), "mini-kcm.yaml")
	written := time.Now()
	if err := os.WriteFile(path, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(path)
		waitNoPods(t, leaseNamespace, miniKCMLabels)
	})

	waitPodsReady(t, leaseNamespace, miniKCMLabels, 1, 3*time.Minute)
	framework.EventuallyEvery(t, time.Minute, 100*time.Millisecond, func() error {
		if leaseHolder(t) == "" {
			return fmt.Errorf("the Lease %s/%s has no holder", leaseNamespace, leaseName)
		}
		return nil
	})
	t.Logf("NODE-NUMBERS static pod Ready and leading %.1fs after its manifest was written (holder %s)",
		time.Since(written).Seconds(), leaseHolder(t))
	assertLeaseScope(t, "deploy/static-pod/", staticPodUser)

	installSample(t)
	waitSampleRolledOut(t, 3)
	scaleSample(t, 2)
}

// renderStaticPod renders deploy/static-pod/pod/ as README.md says (kubectl
// kustomize), from an overlay that sets the image as for the other installs.
func renderStaticPod(t *testing.T) *corev1.Pod {
	t.Helper()
	dir := overlay(t, "deploy/static-pod/pod", map[string]string{deployImageName: miniKCMImage})
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(kubectl(t, "kustomize", dir)), &pod); err != nil || pod.Kind != "Pod" {
		t.Fatalf("kubectl kustomize deploy/static-pod/pod/ (an overlay setting the image) does not render one Pod: %v", err)
	}
	return &pod
}

// deploy/sharded with the apiserver's ShardedListAndWatch gate on: the three
// replicas split the shards evenly and, together, reconcile the sample.
func TestShardedOverlayGivesEachReplicaItsFairShare(t *testing.T) {
	importImages(t)
	installDeploy(t, "deploy/sharded")
	waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, 3*time.Minute)
	assertLeaseScope(t, "deploy/sharded/", replicasServiceAccountConfig(t))
	t.Cleanup(func() { deleteShardLeases(t) })
	assertFenceParametersUndeletable(t, replicasServiceAccountConfig(t))

	client := framework.ControlPlane(t).Client()
	framework.EventuallyEvery(t, 2*time.Minute, 200*time.Millisecond, func() error {
		list, err := client.CoordinationV1().Leases(leaseNamespace).List(t.Context(), metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(sharding.Labels(leaseName, sharding.RoleShard)).String(),
		})
		if err != nil {
			return err
		}
		held := map[string][]int{}
		count := 0
		for _, l := range list.Items {
			i, ok := sharding.ShardOf(leaseName, l.Name)
			if !ok {
				continue
			}
			count++
			h := ptr.Deref(l.Spec.HolderIdentity, "")
			if h == "" {
				return fmt.Errorf("shard %d is not held", i)
			}
			held[holderPod(h)] = append(held[holderPod(h)], i)
		}
		if count == 0 || len(held) != 3 {
			return fmt.Errorf("%d shards held by %v, want all three replicas holding some", count, held)
		}
		share := (count + 2) / 3
		for pod, s := range held {
			if len(s) != share && len(s) != share-1 {
				return fmt.Errorf("%s holds shards %v of %d, want %d or %d", pod, s, count, share-1, share)
			}
		}
		t.Logf("NODE-NUMBERS sharded: %d shards held %v", count, held)
		return nil
	})

	installSample(t)
	waitSampleRolledOut(t, 3)
	scaleSample(t, 5)
}

// deleteShardLeases removes the sharded install's Leases, as the uninstall steps do,
// so that a later install starts clean.
func deleteShardLeases(t *testing.T) {
	client := framework.ControlPlane(t).Client()
	list, err := client.CoordinationV1().Leases(leaseNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, l := range list.Items {
		if strings.HasPrefix(l.Name, leaseName) {
			_ = client.CoordinationV1().Leases(leaseNamespace).Delete(context.Background(), l.Name, metav1.DeleteOptions{})
		}
	}
}
