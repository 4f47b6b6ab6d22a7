package coll

import "math"

// The floating-point formats narrower than float32 that NCCL reduces (NCCL 2.28's ncclFloat16,
// ncclBfloat16, ncclFloat8e4m3 and ncclFloat8e5m2): IEEE binary16 (half), bfloat16, and the OCP
// 8-bit formats E4M3 (the "FN" variant: no infinities, NaN = S.1111.111, largest 448) and E5M2
// (IEEE-like: infinities, largest finite 57344).
//
// Narrowing rounds to nearest, ties to even, as CUDA's __float2half_rn, __float2bfloat16_rn and
// __nv_cvt_float_to_fp8(…, __NV_SATFINITE, …) do: half and bfloat16 overflow to infinity, the fp8
// formats saturate to ±largest finite (infinity included); NaN becomes the format's canonical
// positive NaN (all exponent and mantissa bits set). NarrowFormat.Encode and Decode implement
// the rules for every format; HalfToFloat32, Float32ToHalf and the other per-format functions
// are the same conversions on float32 values.

// NarrowFormat is a binary floating-point format narrower than float32, described by its field
// widths.
type NarrowFormat struct {
	Name     string
	ExpBits  int
	ManBits  int
	Bias     int
	HasInf   bool // IEEE-style all-ones exponent (inf and NaN); else only mantissa all-ones is NaN
	Saturate bool // overflow gives ±largest finite instead of infinity
}

// The formats NCCL reduces.
var (
	FormatHalf     = NarrowFormat{Name: "half", ExpBits: 5, ManBits: 10, Bias: 15, HasInf: true}
	FormatBfloat16 = NarrowFormat{Name: "bfloat16", ExpBits: 8, ManBits: 7, Bias: 127, HasInf: true}
	FormatE4M3     = NarrowFormat{Name: "f8e4m3", ExpBits: 4, ManBits: 3, Bias: 7, Saturate: true}
	FormatE5M2     = NarrowFormat{Name: "f8e5m2", ExpBits: 5, ManBits: 2, Bias: 15, HasInf: true, Saturate: true}
)

// Narrow returns the format of a narrow float type (half, bfloat16, fp8); ok is false for the
// others.
func (d DataType) Narrow() (f NarrowFormat, ok bool) {
	switch d {
	case Float16:
		return FormatHalf, true
	case Bfloat16:
		return FormatBfloat16, true
	case Float8e4m3:
		return FormatE4M3, true
	case Float8e5m2:
		return FormatE5M2, true
	}
	return NarrowFormat{}, false
}

func (f NarrowFormat) expMax() uint32    { return 1<<f.ExpBits - 1 }
func (f NarrowFormat) manMask() uint32   { return 1<<f.ManBits - 1 }
func (f NarrowFormat) signBit() uint32   { return 1 << (f.ExpBits + f.ManBits) }
func (f NarrowFormat) minNormalExp() int { return 1 - f.Bias }

// SignBit is the sign bit of a code.
func (f NarrowFormat) SignBit() uint16 { return uint16(f.signBit()) }

// NaN is the canonical NaN code the conversions produce.
func (f NarrowFormat) NaN() uint16 { return uint16(f.expMax()<<f.ManBits | f.manMask()) }

// MaxFinite is the largest finite value.
func (f NarrowFormat) MaxFinite() float64 {
	if f.HasInf {
		return math.Ldexp(2-math.Ldexp(1, -f.ManBits), int(f.expMax())-1-f.Bias)
	}
	return math.Ldexp(2-math.Ldexp(1, 1-f.ManBits), int(f.expMax())-f.Bias)
}

// SmallestPositive is the smallest positive (subnormal) value.
func (f NarrowFormat) SmallestPositive() float64 {
	return math.Ldexp(1, f.minNormalExp()-f.ManBits)
}

// IsNaN reports whether code is a NaN.
func (f NarrowFormat) IsNaN(code uint16) bool {
	e := (uint32(code) >> f.ManBits) & f.expMax()
	m := uint32(code) & f.manMask()
	if f.HasInf {
		return e == f.expMax() && m != 0
	}
	return e == f.expMax() && m == f.manMask()
}

// IsFinite reports whether code is neither infinite nor NaN.
func (f NarrowFormat) IsFinite(code uint16) bool {
	e := (uint32(code) >> f.ManBits) & f.expMax()
	if f.HasInf {
		return e != f.expMax()
	}
	return !f.IsNaN(code)
}

// Decode widens a code (exactly).
func (f NarrowFormat) Decode(code uint16) float64 {
	c := uint32(code)
	e := (c >> f.ManBits) & f.expMax()
	m := c & f.manMask()
	var v float64
	switch {
	case f.IsNaN(code):
		return math.NaN()
	case f.HasInf && e == f.expMax():
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(m), f.minNormalExp()-f.ManBits)
	default:
		v = math.Ldexp(1+math.Ldexp(float64(m), -f.ManBits), int(e)-f.Bias)
	}
	if c&f.signBit() != 0 {
		v = -v
	}
	return v
}

// Encode narrows x, rounding to nearest even once (on the bits of x: no float arithmetic).
func (f NarrowFormat) Encode(x float64) uint16 {
	b := math.Float64bits(x)
	sign := uint32(b>>63) << (f.ExpBits + f.ManBits)
	exp := int(b>>52) & 0x7ff
	man := b & (1<<52 - 1)
	switch {
	case exp == 0x7ff && man != 0:
		return f.NaN()
	case exp == 0x7ff:
		return f.overflow(sign)
	case exp == 0:
		return uint16(sign) // zero, or a float64 subnormal: far below every narrow format's range
	}
	// x = sig × 2^(exp−1075); the code's significand keeps ManBits bits after the leading one, or
	// fewer below the smallest normal exponent (a subnormal code).
	sig := man | 1<<52
	te := exp - 1023 + f.Bias // the code's biased exponent
	shift := 52 - f.ManBits
	if te < 1 {
		shift += 1 - te
		te = 1
	}
	if shift > 60 {
		return uint16(sign) // below half the smallest subnormal
	}
	res := sig >> shift
	rem := sig & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || rem == half && res&1 == 1 {
		res++
	}
	// res carries the leading one at bit ManBits for a normal code (none for a subnormal): adding
	// it to (te−1)<<ManBits sets the exponent, and a carry out of rounding moves to the next one.
	code := uint32(te-1)<<f.ManBits + uint32(res)
	if code > f.maxFiniteCode() {
		return f.overflow(sign)
	}
	return uint16(sign | code)
}

// maxFiniteCode is the largest finite code without its sign.
func (f NarrowFormat) maxFiniteCode() uint32 {
	if f.HasInf {
		return (f.expMax()-1)<<f.ManBits | f.manMask()
	}
	return f.expMax()<<f.ManBits | (f.manMask() - 1)
}

// overflow is what a value beyond the largest finite becomes: ±largest finite (saturating
// formats) or ±infinity.
func (f NarrowFormat) overflow(sign uint32) uint16 {
	if f.Saturate || !f.HasInf {
		return uint16(sign | f.maxFiniteCode())
	}
	return uint16(sign | f.expMax()<<f.ManBits)
}

// The per-format conversions, for the CPU engine's per-element loops: decoding reads a table built
// from Decode; encoding is Encode (float32 → float64 is exact, so the result is rounded once),
// specialised to float32 bits for half and bfloat16.

var (
	halfTable = decodeTable(FormatHalf, 1<<16)
	e4m3Table = decodeTable(FormatE4M3, 1<<8)
	e5m2Table = decodeTable(FormatE5M2, 1<<8)
)

func decodeTable(f NarrowFormat, n int) []float32 {
	t := make([]float32, n)
	for c := range t {
		t[c] = float32(f.Decode(uint16(c)))
	}
	return t
}

// HalfToFloat32 widens an IEEE binary16 code.
func HalfToFloat32(h uint16) float32 { return halfTable[h] }

// Float32ToHalf narrows to IEEE binary16; overflow gives infinity. It is FormatHalf.Encode
// specialised to float32 bits (four times faster; the tests compare the two at every rounding
// boundary).
func Float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return FormatHalf.NaN()
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// subnormal half (or zero): value = man' × 2^-24
		if e < -10 {
			return sign // rounds to zero (including the tie at 2^-25, even = 0)
		}
		m := man | 0x800000 // 24-bit significand
		shift := uint32(14 - e)
		res := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && res&1 == 1) {
			res++
		}
		return sign | uint16(res)
	}
	res := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && res&1 == 1) {
		res++ // may carry into the exponent, up to infinity: correct
	}
	return sign | uint16(res)
}

// Bfloat16ToFloat32 widens a bfloat16 code (the high half of a float32).
func Bfloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBfloat16 narrows to bfloat16; overflow gives infinity. It is FormatBfloat16.Encode
// specialised to float32 bits (rounding the low half away).
func Float32ToBfloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return FormatBfloat16.NaN()
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// E4M3ToFloat32 widens an fp8 E4M3 code.
func E4M3ToFloat32(c uint8) float32 { return e4m3Table[c] }

// Float32ToE4M3 narrows to fp8 E4M3, saturating.
func Float32ToE4M3(v float32) uint8 { return uint8(FormatE4M3.Encode(float64(v))) }

// E5M2ToFloat32 widens an fp8 E5M2 code.
func E5M2ToFloat32(c uint8) float32 { return e5m2Table[c] }

// Float32ToE5M2 narrows to fp8 E5M2, saturating.
func Float32ToE5M2(v float32) uint8 { return uint8(FormatE5M2.Encode(float64(v))) }
