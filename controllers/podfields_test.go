package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func noController(context.Context, Context) (Controller, int, error) { return nil, 0, nil }

func TestPodReadsIsTheUnionOfTheDeclarations(t *testing.T) {
	r, err := NewRegistry(
		Descriptor{Name: "a-controller", New: noController, PodFields: []PodField{PodPhase, PodNodeName},
			PodAnnotations: []string{"example.com/b"}},
		Descriptor{Name: "b-controller", New: noController, PodFields: []PodField{PodNodeName, PodIPs},
			PodAnnotations: []string{"example.com/a", "example.com/b"}},
		Descriptor{Name: "c-controller", New: noController},
	)
	if err != nil {
		t.Fatal(err)
	}
	got := r.PodReads()
	if want := []PodField{PodNodeName, PodPhase, PodIPs}; !slices.Equal(got.Fields, slices.Sorted(slices.Values(want))) {
		t.Errorf("fields %v, want %v sorted", got.Fields, want)
	}
	if want := []string{"example.com/a", "example.com/b"}; !slices.Equal(got.Annotations, want) {
		t.Errorf("annotations %v, want %v", got.Annotations, want)
	}
}

func TestRegistryRejectsPodFieldsOutsideTheVocabulary(t *testing.T) {
	for _, d := range []Descriptor{
		{Name: "a-controller", New: noController, PodFields: []PodField{"spec.containers.image"}},
		{Name: "a-controller", New: noController, PodAnnotations: []string{""}},
	} {
		if _, err := NewRegistry(d); err == nil || !strings.Contains(err.Error(), "a-controller") {
			t.Errorf("NewRegistry(%+v) = %v, want an error naming the controller", d, err)
		}
	}
}
