package cachedpod

import (
	"errors"
	"math/bits"
)

// Just enough of the protobuf wire format to copy the fields we keep from one encoded
// message to another; see https://protobuf.dev/programming-guides/encoding/.

// Wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

var errMalformed = errors.New("malformed protobuf message")

// field is one field of an encoded message.
type field struct {
	num  uint64
	typ  uint64
	all  []byte // the whole field: tag, length if any, and value
	data []byte // the value of a length-delimited field (a string, bytes or a message)
}

// nextField splits the first field off b.
func nextField(b []byte) (field, []byte, error) {
	tag, n := readVarint(b)
	if n == 0 {
		return field{}, nil, errMalformed
	}
	f := field{num: tag >> 3, typ: tag & 7}
	if f.num == 0 {
		return field{}, nil, errMalformed
	}
	end := n
	switch f.typ {
	case wireVarint:
		_, m := readVarint(b[n:])
		if m == 0 {
			return field{}, nil, errMalformed
		}
		end += m
	case wireFixed64:
		end += 8
	case wireFixed32:
		end += 4
	case wireBytes:
		length, m := readVarint(b[n:])
		if m == 0 || length > uint64(len(b)-n-m) {
			return field{}, nil, errMalformed
		}
		end += m + int(length)
		f.data = b[n+m : end]
	default:
		// Groups (3 and 4) are not used by Kubernetes types.
		return field{}, nil, errMalformed
	}
	if end > len(b) {
		return field{}, nil, errMalformed
	}
	f.all = b[:end]
	return f, b[end:], nil
}

// readVarint decodes the varint at the start of b and returns it and its length, or a
// length of 0 if b does not start with a valid varint.
func readVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

func appendVarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func varintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}

// filter appends to dst the fields of the encoded message src that it keeps.
type filter func(dst, src []byte) ([]byte, error)

// appendMessage appends src, a length-delimited field holding a message, to dst with
// only the fields keep keeps. The filtered message is written in place after room for
// the original length, which is never shorter than the filtered one, and moved back if
// its length takes fewer bytes.
func appendMessage(dst []byte, f field, keep filter) ([]byte, error) {
	tag, _ := readVarint(f.all)
	dst = appendVarint(dst, tag)
	lengthAt := len(dst)
	room := varintLen(uint64(len(f.data)))
	for range room {
		dst = append(dst, 0)
	}
	start := len(dst)
	dst, err := keep(dst, f.data)
	if err != nil {
		return nil, err
	}
	n := len(dst) - start
	var buf [10]byte
	length := appendVarint(buf[:0], uint64(n))
	copy(dst[lengthAt+len(length):], dst[start:])
	copy(dst[lengthAt:], length)
	return dst[:lengthAt+len(length)+n], nil
}

// bytesField returns the value of the string or bytes field num of the encoded
// message src; like the generated decoders, it takes the last if there are several.
func bytesField(src []byte, num uint64) ([]byte, error) {
	var value []byte
	for len(src) > 0 {
		f, rest, err := nextField(src)
		if err != nil {
			return nil, err
		}
		if f.num == num && f.typ == wireBytes {
			value = f.data
		}
		src = rest
	}
	return value, nil
}
