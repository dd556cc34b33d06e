// Package cachetrim trims objects before they enter the shared informer cache, keeping
// only what mini-kcm's controllers read: of pods, most of the object; of the four other
// cached kinds (Services, Endpoints, ReplicaSets, Deployments), the managedFields. Pods are
// by far the most numerous objects in the cache, and most of a pod (container images,
// commands, environment, resources, probes, volumes, tolerations, annotations, container
// states) is for the kubelet and the scheduler.
//
// Of a pod, the controllers read, and Trim keeps:
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
// The list of kept fields is written once, as the protobuf filter of protobuf.go. The
// Decoder applies it while decoding, so that what it drops is never decoded; Trim
// applies it to a pod decoded whole (from JSON, with --kube-api-content-type=
// application/json) by encoding the pod and decoding what the filter keeps. A
// controller that starts reading another pod field must add it there (and to
// TestTrimKeepsWhatControllersRead); it would otherwise see the field empty. Cached pods
// are never written back: controllers change pods only through patches and deletes, so
// nothing trimmed here can be lost on the apiserver.
package cachetrim

import (
	v1 "k8s.io/api/core/v1"
)

// Trim reduces pod in place to the fields the controllers read, the same the Decoder
// keeps: it encodes the pod and decodes only what the Decoder's filter keeps of the
// encoding. It costs an encoding and a decoding, so the informers call it only for pods
// the Decoder did not decode. The pod must not be shared: the informer's transform
// receives each object freshly decoded. A pod that cannot be encoded, which a decoded
// pod always can, is left whole: bigger, but never wrong.
func Trim(pod *v1.Pod) {
	data, err := pod.Marshal()
	if err != nil {
		return
	}
	trimmed, err := appendPod(nil, data)
	if err != nil {
		return
	}
	typeMeta := pod.TypeMeta
	var kept v1.Pod
	if err := kept.Unmarshal(trimmed); err != nil {
		return
	}
	*pod = kept
	pod.TypeMeta = typeMeta
}
