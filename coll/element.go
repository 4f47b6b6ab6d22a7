package coll

import (
	"encoding/binary"
	"math"
)

// Elements in memory. A buffer of type d holds d.Size()-byte elements in native byte order. An
// element's bits are its encoding widened to 64 bits: integers sign- or zero-extended (so that
// uint64(int64(x)) round-trips a signed value), floats their IEEE or OCP bit pattern.

// IsFloat reports whether d is a floating-point type.
func (d DataType) IsFloat() bool {
	switch d {
	case Float16, Float32, Float64, Bfloat16, Float8e4m3, Float8e5m2:
		return true
	}
	return false
}

// IsSigned reports whether d is a signed integer type.
func (d DataType) IsSigned() bool { return d == Int8 || d == Int32 || d == Int64 }

// Bits reads element i of b.
func (d DataType) Bits(b []byte, i int) uint64 {
	switch d {
	case Int8:
		return uint64(int64(int8(b[i])))
	case Uint8, Float8e4m3, Float8e5m2:
		return uint64(b[i])
	case Float16, Bfloat16:
		return uint64(binary.NativeEndian.Uint16(b[2*i:]))
	case Int32:
		return uint64(int64(int32(binary.NativeEndian.Uint32(b[4*i:]))))
	case Uint32, Float32:
		return uint64(binary.NativeEndian.Uint32(b[4*i:]))
	}
	return binary.NativeEndian.Uint64(b[8*i:])
}

// SetBits writes element i of b: the low d.Size() bytes of v.
func (d DataType) SetBits(b []byte, i int, v uint64) {
	switch d.Size() {
	case 1:
		b[i] = byte(v)
	case 2:
		binary.NativeEndian.PutUint16(b[2*i:], uint16(v))
	case 4:
		binary.NativeEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.NativeEndian.PutUint64(b[8*i:], v)
	}
}

// Wrap truncates v to d's width and extends it back: the result of d's wrapping arithmetic.
func (d DataType) Wrap(v uint64) uint64 {
	switch d {
	case Int8:
		return uint64(int64(int8(v)))
	case Int32:
		return uint64(int64(int32(v)))
	case Int64, Uint64:
		return v
	}
	return v & (1<<(8*d.Size()) - 1)
}

// Float is the value of an element's bits (integers above 2^53 rounded to float64).
func (d DataType) Float(bits uint64) float64 {
	switch d {
	case Float32:
		return float64(math.Float32frombits(uint32(bits)))
	case Float64:
		return math.Float64frombits(bits)
	case Uint8, Uint32, Uint64:
		return float64(bits)
	case Float16:
		return float64(HalfToFloat32(uint16(bits)))
	case Bfloat16:
		return float64(Bfloat16ToFloat32(uint16(bits)))
	case Float8e4m3:
		return float64(E4M3ToFloat32(uint8(bits)))
	case Float8e5m2:
		return float64(E5M2ToFloat32(uint8(bits)))
	}
	return float64(int64(bits))
}

// FromFloat is v as an element of d: floats round to nearest even (NarrowFormat's rules for the
// narrow ones); integers truncate toward zero to int64 and wrap to the type's width.
func (d DataType) FromFloat(v float64) uint64 {
	switch d {
	case Float32:
		return uint64(math.Float32bits(float32(v)))
	case Float64:
		return math.Float64bits(v)
	}
	if f, ok := d.Narrow(); ok {
		return uint64(f.Encode(v))
	}
	return d.Wrap(uint64(int64(v)))
}

// Round is v rounded to d, as a float64.
func (d DataType) Round(v float64) float64 { return d.Float(d.FromFloat(v)) }

// Value reads element i of b as a float64 (Float of its bits).
func (d DataType) Value(b []byte, i int) float64 { return d.Float(d.Bits(b, i)) }

// SetValue writes v as element i of b (FromFloat).
func (d DataType) SetValue(b []byte, i int, v float64) { d.SetBits(b, i, d.FromFloat(v)) }

// Precision is the number of significand bits of a float type, the leading one included (11 for
// half, 8 for bfloat16, 24 for float, 53 for double, 4 for E4M3, 3 for E5M2); 0 for integers.
func (d DataType) Precision() int {
	switch d {
	case Float32:
		return 24
	case Float64:
		return 53
	}
	if f, ok := d.Narrow(); ok {
		return f.ManBits + 1
	}
	return 0
}

// Epsilon is a float type's machine epsilon, 2^(1−Precision): the gap between 1 and the next
// value, twice the largest relative error of one rounding to nearest. 0 for integers.
func (d DataType) Epsilon() float64 {
	if p := d.Precision(); p > 0 {
		return math.Ldexp(1, 1-p)
	}
	return 0
}

// SmallestPositive is a float type's smallest positive (subnormal) value: the spacing of its
// values near zero, which bounds the absolute error of one rounding there (half of it). 0 for
// integers.
func (d DataType) SmallestPositive() float64 {
	switch d {
	case Float32:
		return math.SmallestNonzeroFloat32
	case Float64:
		return math.SmallestNonzeroFloat64
	}
	if f, ok := d.Narrow(); ok {
		return f.SmallestPositive()
	}
	return 0
}

// MaxFinite is a float type's largest finite value (0 for integers).
func (d DataType) MaxFinite() float64 {
	switch d {
	case Float32:
		return math.MaxFloat32
	case Float64:
		return math.MaxFloat64
	}
	if f, ok := d.Narrow(); ok {
		return f.MaxFinite()
	}
	return 0
}
