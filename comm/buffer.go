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
// lose precision).
func Element(dt coll.DataType, b []byte, i int) float64 {
	switch dt {
	case coll.Int8:
		return float64(int8(b[i]))
	case coll.Uint8:
		return float64(b[i])
	case coll.Int32:
		return float64(As[int32](b)[i])
	case coll.Uint32:
		return float64(As[uint32](b)[i])
	case coll.Int64:
		return float64(As[int64](b)[i])
	case coll.Uint64:
		return float64(As[uint64](b)[i])
	case coll.Float16:
		return float64(HalfToFloat32(As[uint16](b)[i]))
	case coll.Bfloat16:
		return float64(Bfloat16ToFloat32(As[uint16](b)[i]))
	case coll.Float32:
		return float64(As[float32](b)[i])
	case coll.Float64:
		return As[float64](b)[i]
	case coll.Float8e4m3:
		return float64(E4M3ToFloat32(b[i]))
	case coll.Float8e5m2:
		return float64(E5M2ToFloat32(b[i]))
	}
	return 0
}

// SetElement writes v as element i of b (type dt), rounding to the type (integers truncate to
// int64, then wrap to the type's width).
func SetElement(dt coll.DataType, b []byte, i int, v float64) {
	switch dt {
	case coll.Int8:
		b[i] = byte(int8(int64(v)))
	case coll.Uint8:
		b[i] = uint8(int64(v))
	case coll.Int32:
		As[int32](b)[i] = int32(int64(v))
	case coll.Uint32:
		As[uint32](b)[i] = uint32(int64(v))
	case coll.Int64:
		As[int64](b)[i] = int64(v)
	case coll.Uint64:
		As[uint64](b)[i] = uint64(int64(v))
	case coll.Float16:
		As[uint16](b)[i] = Float32ToHalf(float32(v))
	case coll.Bfloat16:
		As[uint16](b)[i] = Float32ToBfloat16(float32(v))
	case coll.Float32:
		As[float32](b)[i] = float32(v)
	case coll.Float64:
		As[float64](b)[i] = v
	case coll.Float8e4m3:
		b[i] = Float32ToE4M3(float32(v))
	case coll.Float8e5m2:
		b[i] = Float32ToE5M2(float32(v))
	}
}

// IsFloat reports whether dt is a floating-point type.
func IsFloat(dt coll.DataType) bool { return isFloat(dt) }
