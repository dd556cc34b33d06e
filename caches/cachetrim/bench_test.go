package cachetrim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchmarkPod is a full pod, in the protobuf encoding a watch delivers it in.
func benchmarkPod(b *testing.B) []byte {
	pod := fullPod("web-0", time.Hour, true, 3, "-5")
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	return encode(b, pod)
}

// BenchmarkDecodePodTrimmed is the informers' decoding of a watched pod.
func BenchmarkDecodePodTrimmed(b *testing.B) {
	data := benchmarkPod(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := trimDecoder.Decode(data, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrim is the transform's trimming of a pod decoded whole (from JSON).
func BenchmarkTrim(b *testing.B) {
	pod := fullPod("web-0", time.Hour, true, 3, "-5")
	pods := make([]*v1.Pod, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if len(pods) == 0 {
			b.StopTimer()
			for range cap(pods) {
				pods = append(pods, pod.DeepCopy())
			}
			b.StartTimer()
		}
		p := pods[len(pods)-1]
		pods = pods[:len(pods)-1]
		trimmer.Trim(p)
	}
}
