package cachetrim

import (
	"bytes"
	"math/rand/v2"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/randfill"

	"github.com/mini-kcm/mini-kcm/controllers/podranking"
)

var (
	protobufSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	// wholeDecoder decodes like the informers' client would without Decoder.
	wholeDecoder = scheme.Codecs.WithoutConversion().DecoderToVersion(protobufSerializer, runtime.InternalGroupVersioner)
	trimDecoder  = Decoder{Decoder: wholeDecoder, Trimmer: trimmer}
)

func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := protobufSerializer.Encode(obj, &buf); err != nil {
		t.Fatalf("encoding %T: %v", obj, err)
	}
	return buf.Bytes()
}

// randomPods fills pods with random values in every field, then makes sure some have
// what Trim looks for: Ready conditions, the deletion-cost annotation.
func randomPods(seed uint64, n int) []*v1.Pod {
	f := randfill.NewWithSeed(int64(seed)).NilChance(0.2).NumElements(0, 3).Funcs(
		// Quantities are a parsed form; random internals would not encode.
		func(q *resource.Quantity, c randfill.Continue) { *q = resource.MustParse("250m") },
	)
	r := rand.New(rand.NewPCG(seed, 1))
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pod := &v1.Pod{}
		f.Fill(pod)
		pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		for j := range pod.Status.Conditions {
			if r.IntN(2) == 0 {
				pod.Status.Conditions[j].Type = v1.PodReady
			}
		}
		if r.IntN(2) == 0 {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[podranking.DeletionCostAnnotation] = "7"
		}
		pods[i] = pod
	}
	return pods
}

// wholeThenTrimmed decodes data whole and trims it as the informers' transform does.
func wholeThenTrimmed(t testing.TB, data []byte) runtime.Object {
	t.Helper()
	obj, _, err := wholeDecoder.Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decoding whole: %v", err)
	}
	switch o := obj.(type) {
	case *v1.Pod:
		trimmer.Trim(o)
	case *v1.PodList:
		for i := range o.Items {
			trimmer.Trim(&o.Items[i])
		}
	}
	return obj
}

func TestDecoderKeepsWhatTrimKeeps(t *testing.T) {
	for i, pod := range randomPods(1, 300) {
		data := encode(t, pod)
		got, gvk, err := trimDecoder.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if *gvk != v1.SchemeGroupVersion.WithKind("Pod") {
			t.Errorf("pod %d: kind %v", i, gvk)
		}
		if want := wholeThenTrimmed(t, data); !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("pod %d decoded trimmed differs from decoded whole, then trimmed:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestDecoderTrimsEveryPodOfAList(t *testing.T) {
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "99", Continue: "next"}}
	for _, pod := range randomPods(2, 20) {
		list.Items = append(list.Items, *pod)
	}
	data := encode(t, list)
	got, _, err := trimDecoder.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := wholeThenTrimmed(t, data); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("list decoded trimmed differs from decoded whole, then trimmed")
	}
	if got.(*v1.PodList).ResourceVersion != "99" || got.(*v1.PodList).Continue != "next" || len(got.(*v1.PodList).Items) != 20 {
		t.Errorf("list metadata or items lost: %+v", got.(*v1.PodList).ListMeta)
	}
}

func TestDecoderDropsOnlyManagedFieldsOfOtherCachedKinds(t *testing.T) {
	rs := &appsv1.ReplicaSet{}
	randfill.NewWithSeed(3).NilChance(0).NumElements(1, 2).Funcs(
		func(q *resource.Quantity, c randfill.Continue) { *q = resource.MustParse("1Gi") },
	).Fill(rs)
	rs.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}
	data := encode(t, rs)
	got, _, err := trimDecoder.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := wholeDecoder.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.(*appsv1.ReplicaSet).ManagedFields) == 0 || len(want.(*appsv1.ReplicaSet).Annotations) == 0 {
		t.Fatal("test ReplicaSet has no managedFields or annotations to check")
	}
	want.(*appsv1.ReplicaSet).ManagedFields = nil
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("ReplicaSet decoded trimmed:\n got %+v\nwant %+v", got, want)
	}
}

func TestDecoderKeepsTheEndOfInitialEvents(t *testing.T) {
	// The bookmark that ends a streaming list: without its annotation an informer
	// would wait for the end of its initial list for ever.
	bookmark := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "123", Annotations: map[string]string{
			metav1.InitialEventsAnnotationKey: "true", "other": "x",
		}},
	}
	got, _, err := trimDecoder.Decode(encode(t, bookmark), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.(*v1.Pod).Annotations; len(a) != 1 || a[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("annotations = %v, want only %s", a, metav1.InitialEventsAnnotationKey)
	}
}

func TestDecoderDecodesIntoTheGivenObject(t *testing.T) {
	pod := randomPods(4, 1)[0]
	into := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stale", Labels: map[string]string{"stale": "x"}}}
	got, _, err := trimDecoder.Decode(encode(t, pod), nil, into)
	if err != nil {
		t.Fatal(err)
	}
	if got != into {
		t.Fatalf("decoded into a new object, not the given one")
	}
	if want := wholeThenTrimmed(t, encode(t, pod)); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("decoding into an object kept something of what it held before")
	}
}

func TestDecoderLeavesEverythingElseToTheWholeDecoder(t *testing.T) {
	pod := fullPod("web-0", 0, true, 0, "")
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}

	// Another encoding: decoded whole (the transform trims it later).
	var buf bytes.Buffer
	jsonSerializer := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	if err := jsonSerializer.Encode(pod, &buf); err != nil {
		t.Fatal(err)
	}
	obj, _, err := Decoder{Decoder: jsonSerializer, Trimmer: trimmer}.Decode(buf.Bytes(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if obj.(*v1.Pod).Spec.Containers[0].Image != "registry.k8s.io/app:1" {
		t.Errorf("a JSON pod was trimmed while decoding")
	}

	// Another kind.
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Message: "gone", Code: 410}
	obj, _, err = trimDecoder.Decode(encode(t, status), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := obj.(*metav1.Status); !ok || s.Message != "gone" {
		t.Errorf("a Status decoded as %#v", obj)
	}

	// Into an object of another type: the whole decoder says what it thinks of that.
	_, _, wholeErr := wholeDecoder.Decode(encode(t, pod), nil, &v1.Service{})
	_, _, err = trimDecoder.Decode(encode(t, pod), nil, &v1.Service{})
	if (err == nil) != (wholeErr == nil) {
		t.Errorf("decoding a pod into a Service: error %v, the whole decoder's %v", err, wholeErr)
	}

	// Malformed: the whole decoder's error, no panic.
	data := encode(t, pod)
	for _, cut := range []int{5, len(data) / 2, len(data) - 1} {
		_, _, wholeErr := wholeDecoder.Decode(data[:cut], nil, nil)
		_, _, err := trimDecoder.Decode(data[:cut], nil, nil)
		if err == nil || wholeErr == nil || err.Error() != wholeErr.Error() {
			t.Errorf("pod cut at %d bytes: error %v, the whole decoder's %v", cut, err, wholeErr)
		}
	}
}

// FuzzDecoder feeds the Decoder arbitrary bytes after the protobuf prefix: it must never
// panic, and whatever it decodes must be what the whole decoder and Trim make of it.
func FuzzDecoder(f *testing.F) {
	for _, pod := range randomPods(6, 8) {
		f.Add(encode(f, pod))
	}
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	for _, pod := range randomPods(7, 3) {
		list.Items = append(list.Items, *pod)
	}
	f.Add(encode(f, list))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, ok := trimmer.decodeTrimmed(data, nil)
		if !ok {
			return
		}
		whole, _, err := wholeDecoder.Decode(data, nil, nil)
		if err != nil {
			return // the trimmed decoding skipped a malformed field no controller reads
		}
		if want := wholeThenTrimmed(t, data); !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("decoded trimmed %+v\nwhole, then trimmed %+v\n(whole %+v)", got, want, whole)
		}
	})
}
