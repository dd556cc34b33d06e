package cachetrim

import (
	"context"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/controllers/podranking"
)

// trimmer keeps what the compiled-in controllers declare, as the app's.
var trimmer = mustTrimmer(all.Registry().PodReads())

func mustTrimmer(reads controllers.PodReads) *Trimmer {
	t, err := NewTrimmer(reads)
	if err != nil {
		panic(err)
	}
	return t
}

// populatedPod is a pod with every field set, a Ready condition among others, and the
// annotations the controllers read among others.
func populatedPod(seed int64) *v1.Pod {
	pod := &v1.Pod{}
	randfill.NewWithSeed(seed).NilChance(0).NumElements(2, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) { *q = resource.MustParse("250m") },
	).Fill(pod)
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Status.Conditions[1].Type = v1.PodReady
	pod.Annotations[podranking.DeletionCostAnnotation] = "7"
	return pod
}

// declaredOf copies from pod what reads declares, reading the Go object by the fields'
// JSON paths (not their protobuf encoding, as the Trimmer does): the metadata but for
// managedFields and undeclared annotations, and every declared field.
func declaredOf(t *testing.T, pod *v1.Pod, reads controllers.PodReads) *v1.Pod {
	t.Helper()
	// The decoders leave the TypeMeta of a typed object empty.
	want := &v1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy()}
	want.ManagedFields = nil
	want.Annotations = nil
	for _, key := range append([]string{metav1.InitialEventsAnnotationKey}, reads.Annotations...) {
		if value, ok := pod.Annotations[key]; ok {
			if want.Annotations == nil {
				want.Annotations = map[string]string{}
			}
			want.Annotations[key] = value
		}
	}
	for _, f := range reads.Fields {
		if f == controllers.PodReadyCondition {
			for _, c := range pod.Status.Conditions {
				if c.Type == v1.PodReady {
					want.Status.Conditions = []v1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
					break
				}
			}
			continue
		}
		copyPath(t, reflect.ValueOf(want).Elem(), reflect.ValueOf(pod).Elem(), strings.Split(string(f), "."))
	}
	return want
}

// copyPath copies the field at the JSON path from src to dst, through every item of a
// list on the way (dst gets as many items as src).
func copyPath(t *testing.T, dst, src reflect.Value, path []string) {
	t.Helper()
	switch src.Kind() {
	case reflect.Slice:
		if dst.Len() != src.Len() {
			dst.Set(reflect.MakeSlice(src.Type(), src.Len(), src.Len()))
		}
		for i := range src.Len() {
			copyPath(t, dst.Index(i), src.Index(i), path)
		}
		return
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(reflect.New(src.Type().Elem()))
		}
		copyPath(t, dst.Elem(), src.Elem(), path)
		return
	}
	if len(path) == 0 {
		dst.Set(src)
		return
	}
	field, ok := fieldByJSONName(src.Type(), path[0])
	if !ok {
		t.Fatalf("%s has no field %q", src.Type(), path[0])
	}
	copyPath(t, dst.FieldByIndex(field.Index), src.FieldByIndex(field.Index), path[1:])
}

func TestTheDecoderKeepsExactlyWhatTheControllersDeclare(t *testing.T) {
	reads := all.Registry().PodReads()
	if len(reads.Fields) == 0 || len(reads.Annotations) == 0 {
		t.Fatalf("the controllers declare %+v; the test needs fields and annotations", reads)
	}
	for seed := range int64(20) {
		pod := populatedPod(seed)
		got, _, err := trimDecoder.Decode(encode(t, pod), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := declaredOf(t, pod, reads); !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("seed %d: decoded\n %+v\nwant what the controllers declare\n %+v", seed, got, want)
		}
		trimmed := pod.DeepCopy()
		trimmer.Trim(trimmed)
		trimmed.TypeMeta = metav1.TypeMeta{}
		if !equality.Semantic.DeepEqual(trimmed, got) {
			t.Fatalf("seed %d: Trim keeps\n %+v\nthe Decoder\n %+v", seed, trimmed, got)
		}
	}
}

func TestEveryDeclarableFieldIsKeptAloneAndOnlyIt(t *testing.T) {
	pod := populatedPod(1)
	for _, f := range controllers.PodFields() {
		reads := controllers.PodReads{Fields: []controllers.PodField{f}}
		tr, err := NewTrimmer(reads)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got, _, err := Decoder{Decoder: wholeDecoder, Trimmer: tr}.Decode(encode(t, pod), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := declaredOf(t, pod, reads)
		if equality.Semantic.DeepEqual(want, declaredOf(t, pod, controllers.PodReads{})) {
			t.Errorf("%s: the populated pod does not have it", f)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: decoded\n %+v\nwant\n %+v", f, got, want)
		}
	}
}

func TestAControllerDeclaringNothingChangesNothing(t *testing.T) {
	quiet := controllers.Descriptor{
		Name: "quiet-controller",
		New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
			return nil, 0, nil
		},
	}
	registry, err := controllers.NewRegistry(append(all.Descriptors(), quiet)...)
	if err != nil {
		t.Fatal(err)
	}
	with := mustTrimmer(registry.PodReads())
	for seed := range int64(5) {
		data := encode(t, populatedPod(seed))
		got, _, err := Decoder{Decoder: wholeDecoder, Trimmer: with}.Decode(data, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := trimDecoder.Decode(data, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("seed %d: a controller declaring no pod fields changed what pods keep", seed)
		}
	}
}

func TestNewTrimmerRejectsAFieldThePodDoesNotHave(t *testing.T) {
	if _, err := NewTrimmer(controllers.PodReads{Fields: []controllers.PodField{"spec.nodeNames"}}); err == nil {
		t.Error("NewTrimmer accepted spec.nodeNames")
	}
}

func TestAPodWithoutDeclaredFieldsKeepsItsMetadata(t *testing.T) {
	pod := populatedPod(2)
	bare := mustTrimmer(controllers.PodReads{})
	got, _, err := Decoder{Decoder: wholeDecoder, Trimmer: bare}.Decode(encode(t, pod), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := declaredOf(t, pod, controllers.PodReads{})
	if !equality.Semantic.DeepEqual(got, want) || len(want.Labels) == 0 {
		t.Errorf("decoded\n %+v\nwant the metadata alone\n %+v", got, want)
	}
}
