// Package cachetrim trims objects before they enter the shared informer cache, keeping
// only what mini-kcm's controllers read: of pods, what the controllers declare; of the
// four other cached kinds (Services, Endpoints, ReplicaSets, Deployments), all but the
// managedFields. Pods are by far the most numerous objects in the cache, and most of a
// pod (container images, commands, environment, resources, probes, volumes,
// tolerations, annotations, container states) is for the kubelet and the scheduler.
//
// Of a pod, a Trimmer keeps all metadata (names, UID, resourceVersion, labels,
// ownerReferences, timestamps, finalizers) except managedFields and annotations, and
// beyond that only the fields and annotations of its controllers.PodReads: the union of
// what every registered controller declares in its Descriptor (PodFields,
// PodAnnotations). A controller that starts reading another pod field declares it there,
// next to its code, and nothing here changes; one it reads without declaring it finds
// empty.
//
// That one list feeds both ways of trimming. The Decoder applies it while decoding a
// protobuf pod, so that what it drops is never decoded, with a table of protobuf field
// numbers built once from the declared JSON paths and the API types' protobuf tags;
// Trim applies it to a pod decoded whole (from JSON, with --kube-api-content-type=
// application/json) by encoding the pod and decoding what the same table keeps. Cached
// pods are never written back: controllers change pods only through patches and
// deletes, so nothing trimmed here can be lost on the apiserver.
package cachetrim

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Trimmer keeps of pods what the controllers read: their metadata but for managedFields
// and annotations, the annotations and fields some controller declares (controllers.
// PodReads, the union over the registry), and nothing else. It is immutable and safe
// for concurrent use.
type Trimmer struct {
	// annotations are the annotation keys a cached pod keeps.
	annotations []string
	// pod keeps what the controllers read of an encoded pod.
	pod filter
	// kinds are the kinds the Decoder trims, by apiVersion and kind.
	kinds map[[2]string]decodedKind
}

// NewTrimmer returns the Trimmer of what reads declares. It fails on a field it cannot
// find in the pod's API type, which the registry's vocabulary rules out.
func NewTrimmer(reads controllers.PodReads) (*Trimmer, error) {
	t := &Trimmer{
		// The annotation that marks the end of the initial events of a streaming list
		// only ever appears on the bookmark that ends them, which is not cached, but
		// which the informer must see.
		annotations: append([]string{metav1.InitialEventsAnnotationKey}, reads.Annotations...),
	}
	root := &keepNode{}
	for _, f := range reads.Fields {
		if err := root.add(f); err != nil {
			return nil, err
		}
	}
	plan := root.plan()
	for len(plan) <= fieldMetadata {
		plan = append(plan, fieldPlan{})
	}
	plan[fieldMetadata] = fieldPlan{keep: true, filter: t.appendPodMeta}
	t.pod = plan.appendKept
	t.kinds = map[[2]string]decodedKind{
		{"v1", "Pod"}:         kindOf[v1.Pod](t.pod),
		{"v1", "PodList"}:     kindOf[v1.PodList](appendList(t.pod)),
		{"v1", "Service"}:     kindOf[v1.Service](appendObject),
		{"v1", "ServiceList"}: kindOf[v1.ServiceList](appendList(appendObject)),
		//lint:ignore SA1019 the Endpoints controller maintains the deprecated Endpoints API.
		{"v1", "Endpoints"}:           kindOf[v1.Endpoints](appendObject),
		{"v1", "EndpointsList"}:       kindOf[v1.EndpointsList](appendList(appendObject)),
		{"apps/v1", "ReplicaSet"}:     kindOf[appsv1.ReplicaSet](appendObject),
		{"apps/v1", "ReplicaSetList"}: kindOf[appsv1.ReplicaSetList](appendList(appendObject)),
		{"apps/v1", "Deployment"}:     kindOf[appsv1.Deployment](appendObject),
		{"apps/v1", "DeploymentList"}: kindOf[appsv1.DeploymentList](appendList(appendObject)),
	}
	return t, nil
}

// keepsAnnotation tells the annotations a cached pod keeps.
func (t *Trimmer) keepsAnnotation(key []byte) bool {
	for _, a := range t.annotations {
		if string(key) == a {
			return true
		}
	}
	return false
}

// Trim reduces pod in place to the fields the controllers read, the same the Decoder
// keeps: it encodes the pod and decodes only what the Decoder's table keeps of the
// encoding. It costs an encoding and a decoding, so the informers call it only for pods
// the Decoder did not decode. The pod must not be shared: the informer's transform
// receives each object freshly decoded. A pod that cannot be encoded, which a decoded
// pod always can, is left whole: bigger, but never wrong.
func (t *Trimmer) Trim(pod *v1.Pod) {
	data, err := pod.Marshal()
	if err != nil {
		return
	}
	trimmed, err := t.pod(nil, data)
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
