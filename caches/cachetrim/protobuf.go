package cachetrim

import (
	"bytes"
	"reflect"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Decoding is most of what an informer spends its CPU on, and most of the allocations,
// so the Decoder below trims at the source: it copies the fields the controllers read
// (a Trimmer's pod plan: the one list of kept fields, which Trim applies too) from the
// protobuf encoding of a pod into a smaller encoding and decodes only that. It does the
// same for the managedFields of the other objects the controllers cache. Objects and
// encodings it does not know are decoded whole, and the informer's transform trims them.

// Field numbers, from the generated.proto files of k8s.io/api and k8s.io/apimachinery,
// of what every Trimmer handles the same way. The numbers of the pod fields controllers
// declare are read from the Go types' protobuf tags (protobufPath).
const (
	// Pod, and every other top-level object.
	fieldMetadata = 1
	// Lists.
	fieldListItems = 2
	// ObjectMeta.
	fieldAnnotations   = 12
	fieldManagedFields = 17
	// A map entry.
	fieldMapKey = 1
	// runtime.Unknown, the envelope of every object, and its TypeMeta.
	fieldUnknownTypeMeta = 1
	fieldUnknownRaw      = 2
	fieldUnknownEncoding = 3
	fieldTypeMetaVersion = 1
	fieldTypeMetaKind    = 2
)

// appendObject keeps all of an encoded object but the managedFields.
func appendObject(dst, src []byte) ([]byte, error) {
	return keepFields(dst, src, func(dst []byte, f field) ([]byte, error) {
		if f.num == fieldMetadata {
			return appendMessage(dst, f, appendObjectMeta)
		}
		return append(dst, f.all...), nil
	})
}

// appendList returns a filter for an encoded list that keeps what item keeps of every
// item.
func appendList(item filter) filter {
	return func(dst, src []byte) ([]byte, error) {
		return keepFields(dst, src, func(dst []byte, f field) ([]byte, error) {
			if f.num == fieldListItems {
				return appendMessage(dst, f, item)
			}
			return append(dst, f.all...), nil
		})
	}
}

func appendObjectMeta(dst, src []byte) ([]byte, error) {
	return keepFields(dst, src, func(dst []byte, f field) ([]byte, error) {
		if f.num == fieldManagedFields {
			return dst, nil
		}
		return append(dst, f.all...), nil
	})
}

func (t *Trimmer) appendPodMeta(dst, src []byte) ([]byte, error) {
	return keepFields(dst, src, func(dst []byte, f field) ([]byte, error) {
		switch f.num {
		case fieldManagedFields:
			return dst, nil
		case fieldAnnotations:
			key, err := bytesField(f.data, fieldMapKey)
			if err != nil || !t.keepsAnnotation(key) {
				return dst, err
			}
		}
		return append(dst, f.all...), nil
	})
}

// keepFields calls keep with every field of src in turn.
func keepFields(dst, src []byte, keep func(dst []byte, f field) ([]byte, error)) ([]byte, error) {
	for len(src) > 0 {
		f, rest, err := nextField(src)
		if err != nil {
			return nil, err
		}
		if dst, err = keep(dst, f); err != nil {
			return nil, err
		}
		src = rest
	}
	return dst, nil
}

// protobufMessage is a generated Kubernetes type.
type protobufMessage interface {
	runtime.Object
	Reset()
	Unmarshal([]byte) error
}

// decodedKind is what the Decoder knows of one kind: its Go type, how to make an empty
// object of it, and what to keep of its encoding.
type decodedKind struct {
	typ       reflect.Type
	newObject func() protobufMessage
	keep      filter
}

func kindOf[T any, PT interface {
	*T
	protobufMessage
}](keep filter) decodedKind {
	return decodedKind{typ: reflect.TypeFor[PT](), newObject: func() protobufMessage { return PT(new(T)) }, keep: keep}
}

// protobufPrefix starts every object in Kubernetes' protobuf encoding.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// Decoder decodes pods and the other cached kinds trimmed by its Trimmer, when they come
// in Kubernetes' protobuf encoding, and everything else with the wrapped decoder; a nil
// Trimmer decodes everything whole. It is meant for the informers' client only: a
// client that writes objects back must see them whole.
type Decoder struct {
	runtime.Decoder
	Trimmer *Trimmer
}

// Decode implements runtime.Decoder.
func (d Decoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if d.Trimmer != nil {
		if obj, gvk, ok := d.Trimmer.decodeTrimmed(data, into); ok {
			return obj, gvk, nil
		}
	}
	return d.Decoder.Decode(data, defaults, into)
}

// decodeTrimmed decodes data trimmed if it can; if it cannot (another encoding or kind,
// an into of another type, or anything unexpected), it says so and the whole decoder
// takes over, which also reports any error in data.
func (t *Trimmer) decodeTrimmed(data []byte, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, bool) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return nil, nil, false
	}
	apiVersion, kind, raw, ok := unwrap(data[len(protobufPrefix):])
	if !ok {
		return nil, nil, false
	}
	known, ok := t.kinds[[2]string{apiVersion, kind}]
	if !ok {
		return nil, nil, false
	}
	var obj protobufMessage
	if into == nil {
		obj = known.newObject()
	} else if same, ok := into.(protobufMessage); ok && reflect.TypeOf(same) == known.typ {
		obj = same
	} else {
		return nil, nil, false
	}
	// The generated decoders copy what they keep, so the buffer can be reused.
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	trimmed, err := known.keep((*buf)[:0], raw)
	if err != nil {
		return nil, nil, false
	}
	*buf = trimmed
	obj.Reset()
	if err := obj.Unmarshal(trimmed); err != nil {
		return nil, nil, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, nil, false
	}
	return obj, &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, true
}

var buffers = sync.Pool{New: func() any { return new([]byte) }}

// unwrap returns the apiVersion, kind and encoded object of a runtime.Unknown envelope.
func unwrap(src []byte) (apiVersion, kind string, raw []byte, ok bool) {
	for len(src) > 0 {
		f, rest, err := nextField(src)
		if err != nil || f.typ != protowire.BytesType && (f.num == fieldUnknownTypeMeta || f.num == fieldUnknownRaw) {
			return "", "", nil, false
		}
		switch f.num {
		case fieldUnknownTypeMeta:
			version, err := bytesField(f.data, fieldTypeMetaVersion)
			if err != nil {
				return "", "", nil, false
			}
			k, err := bytesField(f.data, fieldTypeMetaKind)
			if err != nil {
				return "", "", nil, false
			}
			apiVersion, kind = string(version), string(k)
		case fieldUnknownRaw:
			raw = f.data
		case fieldUnknownEncoding:
			if len(f.data) > 0 {
				return "", "", nil, false // compressed or otherwise encoded: not ours to read
			}
		}
		src = rest
	}
	return apiVersion, kind, raw, true
}

// NegotiatedSerializer gives a REST client the Decoder of its Trimmer for every encoding
// the wrapped serializer supports.
type NegotiatedSerializer struct {
	runtime.NegotiatedSerializer
	Trimmer *Trimmer
}

// DecoderToVersion implements runtime.NegotiatedSerializer.
func (s NegotiatedSerializer) DecoderToVersion(decoder runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return Decoder{Decoder: s.NegotiatedSerializer.DecoderToVersion(decoder, gv), Trimmer: s.Trimmer}
}
