package freshness

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// storeAt is an informer store that reports a resourceVersion of the test's choosing.
type storeAt struct {
	cache.Store
	mu sync.Mutex
	rv string
}

func (s *storeAt) LastStoreSyncResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

func (s *storeAt) moveTo(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = rv
}

// pod is a cached pod ns/name at resourceVersion rv.
func pod(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// listed is the apiserver's view of a pod ns/name at resourceVersion rv.
func listed(name, rv string) runtime.RawExtension {
	return runtime.RawExtension{Object: &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv},
	}}
}

func TestBarrierProvesEachCacheByProgressOrByContentsAndNamesTheStaleOnes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// storeRV and cached are the store's version and pods; at and apiserver the
		// LIST's version (also the current revision R) and pods.
		storeRV   string
		cached    []*corev1.Pod
		at        string
		apiserver []runtime.RawExtension
		// catchUpTo, when set, is where the store moves shortly after the barrier started.
		catchUpTo string
		want      string // "progress", "contents" or a part of the error
	}{
		{name: "a store at the current revision is fresh without a comparison",
			storeRV: "120", at: "120", want: "progress"},
		{name: "a store that catches up while the barrier waits is fresh",
			storeRV: "100", at: "120", catchUpTo: "121", want: "progress"},
		{name: "a quiet store behind the revision holding what the apiserver lists is fresh",
			storeRV: "100", cached: []*corev1.Pod{pod("a", "90"), pod("b", "99")},
			at: "120", apiserver: []runtime.RawExtension{listed("a", "90"), listed("b", "99")}, want: "contents"},
		{name: "a store missing a pod the apiserver lists is stale",
			storeRV: "100", cached: []*corev1.Pod{pod("a", "90")},
			at: "120", apiserver: []runtime.RawExtension{listed("a", "90"), listed("b", "110")}, want: "ns/b is missing from the cache"},
		{name: "a store with an older version of a pod is stale",
			storeRV: "100", cached: []*corev1.Pod{pod("a", "90")},
			at: "120", apiserver: []runtime.RawExtension{listed("a", "115")}, want: "ns/a is at resourceVersion 90 in the cache, 115 in the apiserver"},
		{name: "a store holding a pod the apiserver deleted is stale",
			storeRV: "100", cached: []*corev1.Pod{pod("a", "90"), pod("gone", "95")},
			at: "120", apiserver: []runtime.RawExtension{listed("a", "90")}, want: "ns/gone is in the cache but was deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			store := &storeAt{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), rv: tc.storeRV}
			for _, p := range tc.cached {
				if err := store.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			client := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
			client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				list := &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: tc.at}}
				list.Items = tc.apiserver
				return true, list, nil
			})
			if tc.catchUpTo != "" {
				go func() {
					time.Sleep(20 * time.Millisecond)
					store.moveTo(tc.catchUpTo)
				}()
			}
			barrier := Barrier{Metadata: client, Caches: []Cache{{Resource: podsResource, Store: store}},
				Timeout: 300 * time.Millisecond, CompareAfter: 100 * time.Millisecond, Poll: time.Millisecond, PageSize: 500}
			if tc.catchUpTo != "" {
				barrier.CompareAfter = time.Hour
				barrier.Timeout = 10 * time.Second
			}
			result, err := barrier.Wait(ctx)
			switch tc.want {
			case "progress", "contents":
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
				got := result.ByContents
				if tc.want == "progress" {
					got = result.ByProgress
				}
				if len(got) != 1 || got[0] != podsResource.String() || result.Revision != tc.at {
					t.Errorf("result %+v, want pods proven by %s at %s", result, tc.want, tc.at)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pods") {
					t.Fatalf("Wait = %+v, %v; want an error naming pods and %q", result, err, tc.want)
				}
			}
		})
	}
}

func TestBarrierGivesUpWhenTheCurrentRevisionCannotBeRead(t *testing.T) {
	client := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, context.DeadlineExceeded
	})
	store := &storeAt{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), rv: "100"}
	barrier := Barrier{Metadata: client, Caches: []Cache{{Resource: podsResource, Store: store}},
		Timeout: time.Second, CompareAfter: 100 * time.Millisecond, Poll: time.Millisecond, PageSize: 500}
	if _, err := barrier.Wait(context.Background()); err == nil || !strings.Contains(err.Error(), "current resourceVersion") {
		t.Fatalf("Wait = %v, want an error about the current resourceVersion", err)
	}
}
