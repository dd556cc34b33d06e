// Package versions runs mini-kcm against each kube-apiserver version it supports
// (options.SupportedAPIServers): the v1.37.2 kube-apiserver that every other suite runs,
// started with --emulated-version at each older minor version of the range. Emulation
// serves that version's APIs and its feature gates' defaults; it does not reproduce an
// older binary's own bugs or internals (its watch cache, its admission plugins' code).
// The newest version of the range is the binary itself, which every other suite tests.
package versions

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestEachSupportedAPIServerVersionReconcilesADeploymentBehindAService: for each older
// version of the supported range, a control plane whose kube-apiserver emulates it, one
// mini-kcm at its defaults (without leader election, which the other suites cover), and
// a Deployment of three pods behind a Service: the ReplicaSet and its pods are created,
// the Deployment completes once KWOK runs the pods the test binds to its nodes, the
// Endpoints and the EndpointSlice list the three pods, and mini-kcm's start log names
// the version as supported.
func TestEachSupportedAPIServerVersionReconcilesADeploymentBehindAService(t *testing.T) {
	versions := options.TestedAPIServerMinors()
	if len(versions) < 2 {
		t.Fatalf("the supported range %s has no older version to emulate", options.SupportedAPIServers())
	}
	binary := framework.MiniKCMBinary(t)
	for _, v := range versions[:len(versions)-1] {
		t.Run("v"+v, func(t *testing.T) {
			// No kube-scheduler: v1.37's lists the APIs of v1.37 (DeviceTaintRules), which
			// an apiserver emulating an older version does not let it read, so it never
			// gets ready; the skew policy never runs a scheduler newer than its
			// apiserver either. The test binds the pods itself; KWOK runs them.
			cp := controlplane.StartForTest(t, controlplane.Options{KWOK: true, Nodes: 2,
				ExtraAPIServerArgs: []string{"--emulated-version=" + v}})
			info, err := cp.Client().Discovery().ServerVersion()
			if err != nil {
				t.Fatal(err)
			}
			if got := info.EmulationMajor + "." + info.EmulationMinor; got != v {
				t.Fatalf("the apiserver emulates %q, want %s: the test would prove nothing", got, v)
			}
			// deploy/'s identities, applied to an apiserver of this version: the RBAC
			// and the per-controller ServiceAccounts must work on each.
			kubeconfig := framework.ShippedKubeconfig(t, cp, "versions-mini-kcm")
			logPath := filepath.Join(cp.Dir(), "logs", "mini-kcm.log")
			p, err := controlplane.StartProcess(controlplane.ProcessSpec{Name: "mini-kcm", Path: binary, LogPath: logPath,
				Args: []string{"--kubeconfig=" + kubeconfig, "--use-service-account-credentials=true", "--leader-elect=false", "--secure-port=0", "--v=2"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				p.Stop(10 * time.Second)
				if t.Failed() {
					t.Logf("---- last 40 lines of %s ----\n%s", logPath, controlplane.Tail(logPath, 40))
				}
			})
			reconcilesADeploymentBehindAService(t, cp)
			logs := controlplane.Tail(logPath, 100000)
			if !strings.Contains(logs, `"The apiserver's version is supported"`) || !strings.Contains(logs, `emulating="`+v+`"`) {
				t.Errorf("mini-kcm's log does not say that the apiserver, emulating %s, is supported", v)
			}
		})
	}
}

func reconcilesADeploymentBehindAService(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx := t.Context()
	client := cp.Client()
	labels := map[string]string{"app": "web"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := cp.NodeNames()
	framework.Eventually(t, 2*time.Minute, func() error {
		// The scheduler's part: bind each pending pod to a node, in turn.
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		for i, p := range pods.Items {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
					Target: corev1.ObjectReference{Kind: "Node", Name: nodes[i%len(nodes)]}}
				if err := client.CoreV1().Pods("default").Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("binding pod %s: %w", p.Name, err)
				}
			}
		}
		d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := d.Status; s.ObservedGeneration < d.Generation || s.UpdatedReplicas != 3 || s.AvailableReplicas != 3 {
			return fmt.Errorf("deployment web: %+v", s)
		}
		ep, err := client.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 3 {
			return fmt.Errorf("endpoints web: %+v", ep.Subsets)
		}
		slices, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return err
		}
		ready := 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					ready++
				}
			}
		}
		if ready != 3 {
			return fmt.Errorf("the EndpointSlices of web list %d ready endpoints, want 3", ready)
		}
		return nil
	})
}
