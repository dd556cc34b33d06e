package sharding

import (
	"context"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// The coordinator weighs the namespaces by their pods without caching them: it reads
// the pods' metadata a page at a time, so its memory does not grow with the cluster's
// pods, and still counts every pod once.
func TestPodsPerNamespaceCountsEveryPodAPageAtATime(t *testing.T) {
	var pods []metav1.PartialObjectMetadata
	for i := range 1200 {
		ns := "tenant-a"
		if i%3 == 0 {
			ns = "tenant-b"
		}
		pods = append(pods, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-" + strconv.Itoa(i)}})
	}
	client := &pagedPods{pods: pods}
	weights, err := podsPerNamespace(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	if weights["tenant-a"] != 800 || weights["tenant-b"] != 400 || len(weights) != 2 {
		t.Errorf("weights = %v, want tenant-a 800 and tenant-b 400", weights)
	}
	if limits := client.limits; len(limits) != 3 {
		t.Errorf("%d list calls for 1200 pods, want 3 pages", len(limits))
	}
	for _, l := range client.limits {
		if l != weighPageSize {
			t.Errorf("a list call asked for %d pods, want pages of %d", l, weighPageSize)
		}
	}
}

// pagedPods serves pod metadata lists as the apiserver does: at most Limit items, and a
// continue token while more are left. The fake metadata client drops Limit and Continue.
type pagedPods struct {
	metadata.Getter
	pods   []metav1.PartialObjectMetadata
	limits []int64
}

func (p *pagedPods) Resource(schema.GroupVersionResource) metadata.Getter { return p }

func (p *pagedPods) List(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	p.limits = append(p.limits, opts.Limit)
	start, end := 0, len(p.pods)
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	if opts.Limit > 0 {
		end = min(start+int(opts.Limit), len(p.pods))
	}
	list := &metav1.PartialObjectMetadataList{Items: p.pods[start:end]}
	if end < len(p.pods) {
		list.Continue = strconv.Itoa(end)
	}
	return list, nil
}
