package sharding

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrUndetermined is returned by ServerFilters when there is no object to probe with.
var ErrUndetermined = errors.New("cannot tell whether the apiserver filters by shard: it holds no Service to probe with " +
	"(every apiserver creates default/kubernetes shortly after it starts; try again)")

// ServerFilters reports whether the apiserver filters lists and watches by
// shardSelector (the alpha ShardedListAndWatch feature gate of kube-apiserver). It takes
// one Service (every cluster has default/kubernetes) and lists it again by name with a
// shardSelector for every hash but its namespace's. An apiserver with the gate returns
// nothing; one without it ignores the field and returns the Service again: its replicas
// would cache, and act on, other shards' objects unless they filter on their side.
func ServerFilters(ctx context.Context, client kubernetes.Interface) (bool, error) {
	sample, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return false, fmt.Errorf("probing the apiserver for shard filtering: %w", err)
	}
	if len(sample.Items) == 0 {
		return false, ErrUndetermined
	}
	probe := sample.Items[0]
	filtered, err := client.CoreV1().Services(probe.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + probe.Name,
		ShardSelector: excluding(probe.Namespace),
	})
	if err != nil {
		return false, fmt.Errorf("probing the apiserver for shard filtering: %w", err)
	}
	return len(filtered.Items) == 0, nil
}

// excluding returns a shardSelector for every hash but namespace's.
func excluding(namespace string) string {
	if h := Hash(namespace); h > 0 {
		return Plan{Cuts: []uint64{h}}.Selector(0).String() // [0, h)
	}
	return Plan{Cuts: []uint64{1}}.Selector(1).String() // [1, 2^64)
}
