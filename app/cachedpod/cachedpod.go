// Package cachedpod trims pods before they enter the shared informer cache, keeping only
// what mini-kcm's controllers read. Pods are by far the most numerous objects in the
// cache, and most of a pod (container images, commands, environment, resources, probes,
// volumes, tolerations, annotations, container states) is for the kubelet and the
// scheduler: dropping it roughly halves the memory a cached pod takes.
//
// The controllers read, and Trim keeps:
//
//   - all metadata (names, UID, resourceVersion, labels, ownerReferences, timestamps,
//     finalizers) except managedFields and annotations, of which only the
//     pod-deletion-cost annotation is read (ReplicaSet scale-down ranking);
//   - spec.nodeName (ranking, Endpoints), spec.hostname and spec.subdomain (Endpoints);
//   - the name and ports of every container and init container (named target ports of
//     Endpoints) and the restartPolicy of init containers (sidecars, in ranking and
//     Endpoints);
//   - status.phase, the Ready condition, status.podIP and status.podIPs;
//   - the name, readiness and restart count of every container status and init
//     container status (ranking).
//
// Decoder does the same while decoding, so that what it would drop is never decoded
// (see protobuf.go); the informers' transform still calls Trim for pods that come in
// another encoding. A controller that starts reading another pod field must add it to
// both (and to their tests, which check that they agree); it would otherwise see the
// field empty. Cached pods are never written back: controllers change pods only
// through patches and deletes, so nothing trimmed here can be lost on the apiserver.
package cachedpod

import (
	v1 "k8s.io/api/core/v1"
)

// Trim reduces pod in place to the fields the controllers read. The pod must not be
// shared: the informer's transform receives each object freshly decoded.
func Trim(pod *v1.Pod) {
	pod.ManagedFields = nil
	var annotations map[string]string
	for key, value := range pod.Annotations {
		if keepsAnnotation(key) {
			if annotations == nil {
				annotations = make(map[string]string, 1)
			}
			annotations[key] = value
		}
	}
	pod.Annotations = annotations

	trimContainers(pod.Spec.Containers)
	trimContainers(pod.Spec.InitContainers)
	pod.Spec = v1.PodSpec{
		NodeName:       pod.Spec.NodeName,
		Hostname:       pod.Spec.Hostname,
		Subdomain:      pod.Spec.Subdomain,
		Containers:     pod.Spec.Containers,
		InitContainers: pod.Spec.InitContainers,
	}

	var conditions []v1.PodCondition
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			// Reason and message are for people; the controllers read status and time.
			kept := v1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}
			if len(pod.Status.Conditions) == 1 {
				// Reuse the slice: a pod the Decoder trimmed has only this condition.
				conditions = pod.Status.Conditions
				conditions[0] = kept
			} else {
				conditions = []v1.PodCondition{kept}
			}
			break
		}
	}
	trimContainerStatuses(pod.Status.ContainerStatuses)
	trimContainerStatuses(pod.Status.InitContainerStatuses)
	pod.Status = v1.PodStatus{
		Phase:                 pod.Status.Phase,
		Conditions:            conditions,
		PodIP:                 pod.Status.PodIP,
		PodIPs:                pod.Status.PodIPs,
		ContainerStatuses:     pod.Status.ContainerStatuses,
		InitContainerStatuses: pod.Status.InitContainerStatuses,
	}
}

// trimContainers keeps each container's name, ports and restart policy, in place.
func trimContainers(containers []v1.Container) {
	for i, c := range containers {
		containers[i] = v1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy}
	}
}

// trimContainerStatuses keeps each status's name, readiness and restart count, in place.
func trimContainerStatuses(statuses []v1.ContainerStatus) {
	for i, s := range statuses {
		statuses[i] = v1.ContainerStatus{Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount}
	}
}
