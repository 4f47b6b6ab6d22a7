package comm

import (
	"unsafe"

	"github.com/simccl/simccl/coll"
)

// Bytes views a typed slice as the bytes the API takes (no copy).
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// As views bytes as a typed slice (no copy); the length is rounded down to whole elements.
func As[T any](b []byte) []T { return view[T](b) }

// Element reads element i of b (type dt) as a float64 (integers converted; uint64/int64 above 2^53
// lose precision): dt.Value.
func Element(dt coll.DataType, b []byte, i int) float64 { return dt.Value(b, i) }

// SetElement writes v as element i of b (type dt), rounding to the type (integers truncate to
// int64, then wrap to the type's width): dt.SetValue.
func SetElement(dt coll.DataType, b []byte, i int, v float64) { dt.SetValue(b, i, v) }

// IsFloat reports whether dt is a floating-point type: dt.IsFloat.
func IsFloat(dt coll.DataType) bool { return dt.IsFloat() }
