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
// manifest copied into the kubelet's staticPodPath with its kubeconfig on the node.
// The only changes are the image and the kubeconfig's host path, which points into
// the run's directory instead of /etc/kubernetes.
func TestStaticPodTakesTheLeaseAndReconciles(t *testing.T) {
	importImages(t)
	cp := framework.ControlPlane(t)
	installDeploy(t, "deploy/static-pod")

	pod := readStaticPod(t)
	kubeconfig, err := cp.NodeKubeconfig("mini-kcm")
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
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "mini-kcm" {
			pod.Spec.Containers[i].Image = miniKCMImage
		}
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

	installSample(t)
	waitSampleRolledOut(t, 3)
	scaleSample(t, 2)
}

// readStaticPod reads the Pod manifest of deploy/static-pod (wherever below it).
func readStaticPod(t *testing.T) *corev1.Pod {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoPath(t, "deploy/static-pod"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".yaml" {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var pod corev1.Pod
		if err := yaml.Unmarshal(data, &pod); err == nil && pod.Kind == "Pod" {
			return &pod
		}
	}
	t.Fatalf("no Pod manifest in deploy/static-pod (%v)", files)
	return nil
}

// deploy/sharded with the apiserver's ShardedListAndWatch gate on: the three
// replicas split the shards evenly and, together, reconcile the sample.
func TestShardedOverlayGivesEachReplicaItsFairShare(t *testing.T) {
	importImages(t)
	installDeploy(t, "deploy/sharded")
	waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, 3*time.Minute)
	t.Cleanup(func() { deleteShardLeases(t) })

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
