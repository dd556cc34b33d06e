package controllers

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAddIndexerOnceAddsAnIndexOnlyOnce(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	byName := func(obj any) ([]string, error) { return []string{obj.(*v1.Pod).Name}, nil }
	for range 2 {
		if err := AddIndexerOnce(informer, "by-name", byName); err != nil {
			t.Fatalf("AddIndexerOnce: %v", err)
		}
	}
	if _, ok := informer.GetIndexer().GetIndexers()["by-name"]; !ok {
		t.Fatal("the index was not added")
	}
	// Adding it directly a second time is what the informer refuses.
	if err := informer.AddIndexers(cache.Indexers{"by-name": byName}); err == nil {
		t.Error("the informer accepted a second index of the same name; AddIndexerOnce guards nothing")
	}
}
