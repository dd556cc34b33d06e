package cachetrim

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// The filters copy whole fields from one encoded message to another, so they need only
// to split a message into fields (protowire does the wire format) and to rewrite the
// length of a message whose fields they filtered.

var errMalformed = errors.New("malformed protobuf message")

// field is one field of an encoded message.
type field struct {
	num protowire.Number
	typ protowire.Type
	all []byte // the whole field: tag, length if any, and value
	// data is the value of a length-delimited field (a string, bytes or a message).
	data []byte
}

// nextField splits the first field off b.
func nextField(b []byte) (field, []byte, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return field{}, nil, errMalformed
	}
	f := field{num: num, typ: typ}
	var m int
	switch typ {
	case protowire.BytesType:
		f.data, m = protowire.ConsumeBytes(b[n:])
	case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	default:
		// Groups are not used by Kubernetes types.
		return field{}, nil, errMalformed
	}
	if m < 0 {
		return field{}, nil, errMalformed
	}
	f.all = b[:n+m]
	return f, b[n+m:], nil
}

// filter appends to dst the fields of the encoded message src that it keeps.
type filter func(dst, src []byte) ([]byte, error)

// appendMessage appends f, a length-delimited field holding a message, to dst with
// only the fields keep keeps. The filtered message is written in place after room for
// the original length, which is never shorter than the filtered one, and moved back if
// its length takes fewer bytes.
func appendMessage(dst []byte, f field, keep filter) ([]byte, error) {
	dst = protowire.AppendTag(dst, f.num, protowire.BytesType)
	lengthAt := len(dst)
	for range protowire.SizeVarint(uint64(len(f.data))) {
		dst = append(dst, 0)
	}
	start := len(dst)
	dst, err := keep(dst, f.data)
	if err != nil {
		return nil, err
	}
	n := len(dst) - start
	var buf [10]byte // the longest varint
	length := protowire.AppendVarint(buf[:0], uint64(n))
	copy(dst[lengthAt+len(length):], dst[start:])
	copy(dst[lengthAt:], length)
	return dst[:lengthAt+len(length)+n], nil
}

// bytesField returns the value of the string or bytes field num of the encoded
// message src; like the generated decoders, it takes the last if there are several.
func bytesField(src []byte, num protowire.Number) ([]byte, error) {
	var value []byte
	for len(src) > 0 {
		f, rest, err := nextField(src)
		if err != nil {
			return nil, err
		}
		if f.num == num && f.typ == protowire.BytesType {
			value = f.data
		}
		src = rest
	}
	return value, nil
}
