package comm

import (
	"fmt"
	"unsafe"

	"github.com/simccl/simccl/coll"
)

// Reductions on host memory. Buffers are byte slices holding elements of one coll.DataType (native
// byte order); lengths are multiples of the element size. Semantics follow NCCL 2.28 (enqueue.cc
// hostToDevRedOp): Sum, Prod, Min, Max elementwise; Avg runs as PreMulSum with 1/nRanks for
// floating types (the scalar converted to the element type first) and as Sum followed by a
// division by nRanks for integer types; the narrow float types are widened to float32, combined,
// and rounded back.

type integer interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64
}

type number interface {
	integer | ~float32 | ~float64
}

func view[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// reduce3Num writes d = a op b.
func reduce3Num[T number](op coll.RedOp, d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case coll.Sum, coll.Avg, coll.PreMulSum:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case coll.Prod:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case coll.Max:
		for i := range d {
			d[i] = a[i]
			if b[i] > a[i] {
				d[i] = b[i]
			}
		}
	case coll.Min:
		for i := range d {
			d[i] = a[i]
			if b[i] < a[i] {
				d[i] = b[i]
			}
		}
	}
}

func reduceNum[T number](op coll.RedOp, d, s []T) {
	s = s[:len(d)]
	switch op {
	case coll.Sum, coll.Avg, coll.PreMulSum:
		for i := range d {
			d[i] += s[i]
		}
	case coll.Prod:
		for i := range d {
			d[i] *= s[i]
		}
	case coll.Max:
		for i := range d {
			if s[i] > d[i] {
				d[i] = s[i]
			}
		}
	case coll.Min:
		for i := range d {
			if s[i] < d[i] {
				d[i] = s[i]
			}
		}
	}
}

// reduceNarrow combines narrow floats (16- or 8-bit codes) through float32.
func reduceNarrow[T uint8 | uint16](op coll.RedOp, d, s []T, widen func(T) float32, narrow func(float32) T) {
	s = s[:len(d)]
	switch op {
	case coll.Sum, coll.Avg, coll.PreMulSum:
		for i := range d {
			d[i] = narrow(widen(d[i]) + widen(s[i]))
		}
	case coll.Prod:
		for i := range d {
			d[i] = narrow(widen(d[i]) * widen(s[i]))
		}
	case coll.Max:
		for i := range d {
			if widen(s[i]) > widen(d[i]) {
				d[i] = s[i]
			}
		}
	case coll.Min:
		for i := range d {
			if widen(s[i]) < widen(d[i]) {
				d[i] = s[i]
			}
		}
	}
}

func isFloat(t coll.DataType) bool { return t.IsFloat() }

// ReduceInto writes dst = a op b (one pass instead of a copy and a fold); the native numeric types
// only, others fall back to copy + Reduce.
func ReduceInto(t coll.DataType, op coll.RedOp, dst, a, b []byte) error {
	if len(a) < len(dst) || len(b) < len(dst) {
		return fmt.Errorf("comm: reduce: inputs of %d and %d bytes shorter than destination of %d", len(a), len(b), len(dst))
	}
	switch t {
	case coll.Int8:
		reduce3Num(op, view[int8](dst), view[int8](a), view[int8](b))
	case coll.Uint8:
		reduce3Num(op, view[uint8](dst), view[uint8](a), view[uint8](b))
	case coll.Int32:
		reduce3Num(op, view[int32](dst), view[int32](a), view[int32](b))
	case coll.Uint32:
		reduce3Num(op, view[uint32](dst), view[uint32](a), view[uint32](b))
	case coll.Int64:
		reduce3Num(op, view[int64](dst), view[int64](a), view[int64](b))
	case coll.Uint64:
		reduce3Num(op, view[uint64](dst), view[uint64](a), view[uint64](b))
	case coll.Float32:
		reduce3Num(op, view[float32](dst), view[float32](a), view[float32](b))
	case coll.Float64:
		reduce3Num(op, view[float64](dst), view[float64](a), view[float64](b))
	default:
		copy(dst, a)
		return Reduce(t, op, dst, b)
	}
	return nil
}

// Reduce folds src into dst (dst = dst op src) for n = len(dst)/elt elements. Avg and PreMulSum
// combine as Sum (their scaling is applied to the inputs or the result, see Scale and DivideInt).
func Reduce(t coll.DataType, op coll.RedOp, dst, src []byte) error {
	if len(src) < len(dst) {
		return fmt.Errorf("comm: reduce: source of %d bytes shorter than destination of %d", len(src), len(dst))
	}
	switch t {
	case coll.Int8:
		reduceNum(op, view[int8](dst), view[int8](src))
	case coll.Uint8:
		reduceNum(op, view[uint8](dst), view[uint8](src))
	case coll.Int32:
		reduceNum(op, view[int32](dst), view[int32](src))
	case coll.Uint32:
		reduceNum(op, view[uint32](dst), view[uint32](src))
	case coll.Int64:
		reduceNum(op, view[int64](dst), view[int64](src))
	case coll.Uint64:
		reduceNum(op, view[uint64](dst), view[uint64](src))
	case coll.Float32:
		reduceNum(op, view[float32](dst), view[float32](src))
	case coll.Float64:
		reduceNum(op, view[float64](dst), view[float64](src))
	case coll.Float16:
		reduceNarrow(op, view[uint16](dst), view[uint16](src), coll.HalfToFloat32, coll.Float32ToHalf)
	case coll.Bfloat16:
		reduceNarrow(op, view[uint16](dst), view[uint16](src), coll.Bfloat16ToFloat32, coll.Float32ToBfloat16)
	case coll.Float8e4m3:
		reduceNarrow(op, view[uint8](dst), view[uint8](src), coll.E4M3ToFloat32, coll.Float32ToE4M3)
	case coll.Float8e5m2:
		reduceNarrow(op, view[uint8](dst), view[uint8](src), coll.E5M2ToFloat32, coll.Float32ToE5M2)
	default:
		return fmt.Errorf("comm: reduce: unknown data type %v", t)
	}
	return nil
}

func scaleNum[T number](d, s []T, k T) {
	s = s[:len(d)]
	for i := range d {
		d[i] = s[i] * k
	}
}

func scaleNarrow[T uint8 | uint16](d, s []T, k float64, widen func(T) float32, narrow func(float32) T) {
	s = s[:len(d)]
	kk := widen(narrow(float32(k))) // the scalar in the element type, as NCCL converts it
	for i := range d {
		d[i] = narrow(widen(s[i]) * kk)
	}
}

// Scale writes dst = src × k (PreMulSum's pre-multiplication; Avg's 1/nRanks for floats). For
// integer types k is truncated to the type (PreMulSum with an integer scalar).
func Scale(t coll.DataType, dst, src []byte, k float64) error {
	switch t {
	case coll.Int8:
		scaleNum(view[int8](dst), view[int8](src), int8(int64(k)))
	case coll.Uint8:
		scaleNum(view[uint8](dst), view[uint8](src), uint8(int64(k)))
	case coll.Int32:
		scaleNum(view[int32](dst), view[int32](src), int32(int64(k)))
	case coll.Uint32:
		scaleNum(view[uint32](dst), view[uint32](src), uint32(int64(k)))
	case coll.Int64:
		scaleNum(view[int64](dst), view[int64](src), int64(k))
	case coll.Uint64:
		scaleNum(view[uint64](dst), view[uint64](src), uint64(int64(k)))
	case coll.Float32:
		scaleNum(view[float32](dst), view[float32](src), float32(k))
	case coll.Float64:
		scaleNum(view[float64](dst), view[float64](src), k)
	case coll.Float16:
		scaleNarrow(view[uint16](dst), view[uint16](src), k, coll.HalfToFloat32, coll.Float32ToHalf)
	case coll.Bfloat16:
		scaleNarrow(view[uint16](dst), view[uint16](src), k, coll.Bfloat16ToFloat32, coll.Float32ToBfloat16)
	case coll.Float8e4m3:
		scaleNarrow(view[uint8](dst), view[uint8](src), k, coll.E4M3ToFloat32, coll.Float32ToE4M3)
	case coll.Float8e5m2:
		scaleNarrow(view[uint8](dst), view[uint8](src), k, coll.E5M2ToFloat32, coll.Float32ToE5M2)
	default:
		return fmt.Errorf("comm: scale: unknown data type %v", t)
	}
	return nil
}

func divNum[T integer](d []T, n T) {
	for i := range d {
		d[i] /= n
	}
}

// DivideInt divides integer elements by n in place (Avg on integer types: sum, then divide, with
// Go's truncating division, as C's). Floating types are left alone (their Avg was a pre-multiply).
func DivideInt(t coll.DataType, buf []byte, n int) {
	switch t {
	case coll.Int8:
		divNum(view[int8](buf), int8(n))
	case coll.Uint8:
		divNum(view[uint8](buf), uint8(n))
	case coll.Int32:
		divNum(view[int32](buf), int32(n))
	case coll.Uint32:
		divNum(view[uint32](buf), uint32(n))
	case coll.Int64:
		divNum(view[int64](buf), int64(n))
	case coll.Uint64:
		divNum(view[uint64](buf), uint64(n))
	}
}

// preScale is the factor applied to every input before summing, or 0 for none.
func preScale(t coll.DataType, op coll.RedOp, scalar float64, nranks int) float64 {
	switch {
	case op == coll.Avg && isFloat(t):
		return 1 / float64(nranks)
	case op == coll.PreMulSum:
		return scalar
	}
	return 0
}
