package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeCapacity is large enough that no test or benchmark is limited by it, and the
// scheduler spreads pods over nodes rather than filling one.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("1000"),
	corev1.ResourceMemory: resource.MustParse("4Ti"),
	corev1.ResourcePods:   resource.MustParse("10000"),
}

// registerNodes creates n fake nodes named kwok-node-<i> and waits until KWOK made
// them all Ready. Each gets its own InternalIP (10.240.0.<i+1>), which KWOK reports as
// the host IP of its pods.
func (cp *ControlPlane) registerNodes(ctx context.Context, n int) error {
	for i := range n {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{fakeNodeAnnotation: "fake"},
				Labels: map[string]string{
					"type":                   "kwok",
					"kubernetes.io/hostname": name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
				},
			},
			// Nodes are the one kind whose status may be set on create.
			Status: corev1.NodeStatus{
				Capacity:    nodeCapacity,
				Allocatable: nodeCapacity,
				Addresses: []corev1.NodeAddress{
					{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.240.0.%d", i+1)},
					{Type: corev1.NodeHostName, Address: name},
				},
			},
		}
		if _, err := cp.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering node %s: %w", name, err)
		}
		cp.nodeNames = append(cp.nodeNames, name)
	}

	cp.mu.Lock()
	kwok := cp.processes[KWOK]
	cp.mu.Unlock()
	return cp.waitReady(ctx, kwok, func(ctx context.Context) error {
		for _, name := range cp.nodeNames {
			node, err := cp.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("node %s is not Ready yet", name)
			}
		}
		return nil
	})
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
