package sharding

import (
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// countingInformer counts the handlers added and removed.
type countingInformer struct {
	cache.SharedIndexInformer
	added, removed int
}

func (c *countingInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.added++
	return nil, nil
}

func (c *countingInformer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	c.removed++
	return nil
}

// A shard's controllers get the replica's cluster-wide Node informer, which outlives
// their term; the handlers they add must go with the term, or every handover would
// leave a stopped controller reachable from the informer.
func TestAShardTermsNodeHandlersAreRemovedWithTheTerm(t *testing.T) {
	client := fake.NewClientset()
	cluster := informers.NewSharedInformerFactory(client, 0)
	shard := &Informers{selector: "x", cluster: cluster}
	factory := shard.Wrap(informers.NewSharedInformerFactory(client, 0))
	if _, ok := factory.Core().V1().Nodes().Informer().(trackedInformer); !ok {
		t.Fatal("the shard's Node informer is not the tracked cluster one")
	}

	counting := &countingInformer{}
	nodes := trackedInformer{SharedIndexInformer: counting, shard: shard}
	for range 2 {
		if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
			t.Fatal(err)
		}
	}
	shard.RemoveHandlers()
	if counting.added != 2 || counting.removed != 2 {
		t.Errorf("added %d handlers, removed %d at the end of the term; want 2 and 2", counting.added, counting.removed)
	}
	shard.RemoveHandlers()
	if counting.removed != 2 {
		t.Errorf("a second removal removed again (%d)", counting.removed)
	}
}
