package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/mini-kcm/mini-kcm/caches"
	"github.com/mini-kcm/mini-kcm/caches/cacheintern"
	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// pipeline is how one controller manager turns a watched pod into a cached one.
type pipeline struct {
	decoder   runtime.Decoder
	transform cache.TransformFunc
	// indexers are the pod informer's indexes.
	indexers cache.Indexers
}

// wholeDecoder is the decoder client-go's typed clients use for protobuf.
func wholeDecoder() runtime.Decoder {
	return scheme.Codecs.WithoutConversion().DecoderToVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), runtime.InternalGroupVersioner)
}

func pipelineOf(ctx context.Context, impl string) (pipeline, error) {
	switch impl {
	case "upstream":
		return pipeline{
			decoder: wholeDecoder(),
			// kube-controller-manager's shared informers drop managedFields
			// (cmd/kube-controller-manager/app/controllermanager.go, WithTransform(trim)).
			transform: func(obj any) (any, error) {
				if accessor, ok := obj.(metav1.ObjectMetaAccessor); ok {
					accessor.GetObjectMeta().SetManagedFields(nil)
				}
				return obj, nil
			},
			// The factory's namespace index, and pkg/controller's AddPodControllerIndexer,
			// which the Deployment controller adds (upstream's ReplicaSet, Endpoints and
			// EndpointSlice controllers add no pod index).
			indexers: cache.Indexers{
				cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
				"podController": func(obj any) ([]string, error) {
					pod, ok := obj.(*corev1.Pod)
					if !ok {
						return nil, nil
					}
					ref := metav1.GetControllerOf(pod)
					if ref == nil {
						return []string{pod.Namespace}, nil
					}
					return []string{pod.Namespace + "/" + ref.Kind + "/" + ref.Name + "/" + string(ref.UID)}, nil
				},
			},
		}, nil
	case "mini-kcm", "mini-kcm-interned":
		trimmer, err := cachetrim.NewTrimmer(all.Registry().PodReads())
		if err != nil {
			return pipeline{}, err
		}
		transform := caches.Transform(runtime.ContentTypeProtobuf, trimmer)
		if impl == "mini-kcm-interned" {
			interner := cacheintern.New()
			trimmed := transform
			transform = func(obj any) (any, error) {
				obj, err := trimmed(obj)
				if pod, ok := obj.(*corev1.Pod); ok && err == nil {
					interner.Pod(pod)
				}
				return obj, err
			}
		}
		indexers, err := registryPodIndexers(ctx)
		if err != nil {
			return pipeline{}, err
		}
		return pipeline{decoder: cachetrim.Decoder{Decoder: wholeDecoder(), Trimmer: trimmer}, transform: transform, indexers: indexers}, nil
	}
	return pipeline{}, fmt.Errorf("unknown implementation %q: want one of %v", impl, implementations)
}

type fakeClients struct{ client kubernetes.Interface }

func (c fakeClients) Client(string) (kubernetes.Interface, error) { return c.client, nil }

type fakeEvents struct{}

func (fakeEvents) Recorder(string) record.EventRecorder { return record.NewFakeRecorder(100) }

// registryPodIndexers builds every controller of the registry on a shared informer
// factory, as the app does, and returns the indexes they added to its pod informer.
func registryPodIndexers(ctx context.Context) (cache.Indexers, error) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	cc := controllers.Context{InformerFactory: factory, Clients: fakeClients{fake.NewClientset()}, Events: fakeEvents{}}
	for _, d := range all.Descriptors() {
		if _, _, err := d.New(ctx, cc); err != nil {
			return nil, fmt.Errorf("building %s: %w", d.Name, err)
		}
	}
	return factory.Core().V1().Pods().Informer().GetIndexer().GetIndexers(), nil
}

// measurement is what one pipeline's cached pods cost, in bytes per pod unless named
// otherwise.
type measurement struct {
	Implementation string `json:"implementation"`
	Pods           int    `json:"pods"`
	// Objects is the live heap the decoded, transformed pods hold.
	Objects float64 `json:"objectsBytesPerPod"`
	// Store is what a store of them without indexes adds: its items map and keys.
	Store float64 `json:"storeBytesPerPod"`
	// Indexes is what each index adds to that store.
	Indexes map[string]float64 `json:"indexBytesPerPod"`
	// Cached is the live heap of the pods in the pipeline's indexer, indexes included:
	// the figure to compare.
	Cached float64 `json:"cachedBytesPerPod"`
	// DecodeGarbage is what decoding and transforming a pod allocated beyond what
	// stays, DecodeAllocs the allocations it made (staying ones included).
	DecodeGarbage float64 `json:"decodeGarbageBytesPerPod"`
	DecodeAllocs  float64 `json:"decodeAllocsPerPod"`
	// AddGarbage is what adding a pod to the indexer allocated beyond what stays.
	AddGarbage float64 `json:"addGarbageBytesPerPod"`
	// EncodedBytes is the mean size of a pod's protobuf encoding.
	EncodedBytes float64 `json:"encodedBytesPerPod"`

	BaseProfile  string `json:"baseProfile"`
	InuseProfile string `json:"inuseProfile"`
	InuseTop     string `json:"inuseTop,omitempty"`
	AllocTop     string `json:"allocTop,omitempty"`
}

// batch is how many pods are encoded at a time: the encodings are made outside the
// measured windows and dropped after, so that they never weigh in the heap figures.
const batch = 1000

func measure(impl string, shape podShape, profileDir string) (measurement, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := pipelineOf(ctx, impl)
	if err != nil {
		return measurement{}, err
	}
	m := measurement{Implementation: impl, Pods: shape.pods, Indexes: map[string]float64{},
		BaseProfile: profilePath(profileDir, impl, "base"), InuseProfile: profilePath(profileDir, impl, "cached")}
	pods := make([]any, 0, shape.pods)
	// One more item than needed so that the slices of names below never grow in a
	// measured window.
	indexNames := make([]string, 0, len(p.indexers)+1)
	for name := range p.indexers {
		indexNames = append(indexNames, name)
	}
	sort.Strings(indexNames)
	indexer := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, p.indexers)

	base, _, _ := heapAfterGC()
	if err := writeHeapProfile(m.BaseProfile); err != nil {
		return m, err
	}
	var decodeAlloc, decodeMallocs, addAlloc, encoded uint64
	for from := 0; from < shape.pods; from += batch {
		to := min(from+batch, shape.pods)
		data, err := shape.encoded(from, to)
		if err != nil {
			return m, err
		}
		for _, d := range data {
			encoded += uint64(len(d))
		}
		_, before, mallocsBefore := heapAfterGC()
		for _, d := range data {
			decoded, _, err := p.decoder.Decode(d, nil, nil)
			if err != nil {
				return m, fmt.Errorf("decoding a pod: %w", err)
			}
			obj, err := p.transform(decoded)
			if err != nil {
				return m, err
			}
			pods = append(pods, obj)
		}
		_, after, mallocsAfter := heapAfterGC()
		decodeAlloc += after - before
		decodeMallocs += mallocsAfter - mallocsBefore
	}
	objects, beforeAdd, _ := heapAfterGC()
	for _, obj := range pods {
		if err := indexer.Add(obj); err != nil {
			return m, err
		}
	}
	cached, afterAdd, _ := heapAfterGC()
	addAlloc = afterAdd - beforeAdd
	if err := writeHeapProfile(m.InuseProfile); err != nil {
		return m, err
	}

	perPod := func(bytes uint64) float64 { return float64(int64(bytes)) / float64(shape.pods) }
	m.Objects = perPod(objects - base)
	m.Cached = perPod(cached - base)
	m.DecodeGarbage = perPod(decodeAlloc) - m.Objects
	m.DecodeAllocs = perPod(decodeMallocs)
	m.AddGarbage = perPod(addAlloc - (cached - objects))
	m.EncodedBytes = perPod(encoded)

	// The store alone, then each index alone on such a store, each measured against
	// the heap with the pipeline's indexer and dropped before the next.
	withStore := func(indexers cache.Indexers) (float64, error) {
		before, _, _ := heapAfterGC()
		store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
		for _, obj := range pods {
			if err := store.Add(obj); err != nil {
				return 0, err
			}
		}
		after, _, _ := heapAfterGC()
		goruntime.KeepAlive(store)
		return perPod(after - before), nil
	}
	if m.Store, err = withStore(cache.Indexers{}); err != nil {
		return m, err
	}
	for _, name := range indexNames {
		with, err := withStore(cache.Indexers{name: p.indexers[name]})
		if err != nil {
			return m, err
		}
		m.Indexes[name] = with - m.Store
	}
	goruntime.KeepAlive(indexer)
	goruntime.KeepAlive(pods)
	return m, nil
}
