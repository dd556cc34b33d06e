package micro

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// watchedPod is one pod of the end-to-end benchmarks as a pod watch delivers it, in the
// protobuf encoding: Running and Ready, with the managedFields of the three writers
// (the ReplicaSet controller, the scheduler, the fake kubelet).
func watchedPod(b *testing.B) []byte {
	owner := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "bench", UID: "rs-uid"}}
	pod := readyPods(1, 1, owner)[0]
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Spec.SchedulerName = "default-scheduler"
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	pod.Spec.Containers[0].ImagePullPolicy = "IfNotPresent"
	for _, manager := range []string{"mini-kcm", "kube-scheduler", "kwok"} {
		pod.ManagedFields = append(pod.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{` + strings.Repeat(`"k:{\"type\":\"Ready\"}":{".":{},"f:status":{}},`, 12) + `}}}`)},
		})
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(pod, &buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// wholeDecoder is the decoder client-go's typed clients use for protobuf.
var wholeDecoder = scheme.Codecs.WithoutConversion().DecoderToVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), runtime.InternalGroupVersioner)

func benchmarkDecode(b *testing.B, decoder runtime.Decoder) {
	data := watchedPod(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decoder.Decode(data, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodePodWhole decodes a watched pod as client-go does by default.
func BenchmarkDecodePodWhole(b *testing.B) {
	benchmarkDecode(b, wholeDecoder)
}

// BenchmarkDecodePodTrimmed decodes it as mini-kcm's informers do.
func BenchmarkDecodePodTrimmed(b *testing.B) {
	trimmer, err := cachetrim.NewTrimmer(all.Registry().PodReads())
	if err != nil {
		b.Fatal(err)
	}
	benchmarkDecode(b, cachetrim.Decoder{Decoder: wholeDecoder, Trimmer: trimmer})
}
