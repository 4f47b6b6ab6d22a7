package cuda

import "math"

// NarrowFormat is a binary floating-point format narrower than float32, described by its field
// widths: IEEE binary16 (half), bfloat16, and the OCP 8-bit formats E4M3 (no infinities, one NaN
// pattern S.1111.111, largest 448) and E5M2 (IEEE-like). The kernels narrow with the CUDA
// conversions __float2half_rn, __float2bfloat16_rn and __nv_cvt_float_to_fp8(…, __NV_SATFINITE, …):
// round to nearest even; half and bfloat16 overflow to infinity, fp8 saturates to ±largest
// finite. Encode and Decode implement the same rules on the host (tests, scalars).
type NarrowFormat struct {
	Name     string
	ExpBits  int
	ManBits  int
	Bias     int
	HasInf   bool // IEEE-style all-ones exponent (inf and NaN); else only mantissa all-ones is NaN
	Saturate bool // overflow gives ±largest finite instead of infinity
}

// The formats the kernels reduce.
var (
	FormatHalf     = NarrowFormat{Name: "half", ExpBits: 5, ManBits: 10, Bias: 15, HasInf: true}
	FormatBfloat16 = NarrowFormat{Name: "bfloat16", ExpBits: 8, ManBits: 7, Bias: 127, HasInf: true}
	FormatE4M3     = NarrowFormat{Name: "f8e4m3", ExpBits: 4, ManBits: 3, Bias: 7, Saturate: true}
	FormatE5M2     = NarrowFormat{Name: "f8e5m2", ExpBits: 5, ManBits: 2, Bias: 15, HasInf: true, Saturate: true}
)

func (f NarrowFormat) expMax() uint32    { return 1<<f.ExpBits - 1 }
func (f NarrowFormat) manMask() uint32   { return 1<<f.ManBits - 1 }
func (f NarrowFormat) signBit() uint32   { return 1 << (f.ExpBits + f.ManBits) }
func (f NarrowFormat) minNormalExp() int { return 1 - f.Bias }

// MaxFinite is the largest finite value.
func (f NarrowFormat) MaxFinite() float64 {
	if f.HasInf {
		return math.Ldexp(2-math.Ldexp(1, -f.ManBits), int(f.expMax())-1-f.Bias)
	}
	return math.Ldexp(2-math.Ldexp(1, 1-f.ManBits), int(f.expMax())-f.Bias)
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

// Encode narrows x, rounding to nearest even once.
func (f NarrowFormat) Encode(x float64) uint16 {
	var sign uint32
	if math.Signbit(x) {
		sign = f.signBit()
	}
	a := math.Abs(x)
	switch {
	case math.IsNaN(x):
		return uint16(f.expMax()<<f.ManBits | f.manMask()) // a quiet NaN, positive
	case a == 0:
		return uint16(sign)
	}
	maxFin := f.MaxFinite()
	overflow := func() uint16 {
		if f.Saturate || !f.HasInf {
			return uint16(sign | f.encodeFinite(maxFin))
		}
		return uint16(sign | f.expMax()<<f.ManBits)
	}
	if math.IsInf(a, 0) {
		return overflow()
	}
	_, exp := math.Frexp(a) // a = frac × 2^exp, frac in [0.5, 1)
	e := exp - 1
	if e < f.minNormalExp() {
		e = f.minNormalExp()
	}
	q := math.Ldexp(1, e-f.ManBits) // the spacing of representable values around a
	r := math.RoundToEven(a/q) * q
	if r > maxFin {
		return overflow()
	}
	if r == 0 {
		return uint16(sign)
	}
	return uint16(sign | f.encodeFinite(r))
}

// encodeFinite packs a positive value that the format represents exactly.
func (f NarrowFormat) encodeFinite(r float64) uint32 {
	if r < math.Ldexp(1, f.minNormalExp()) {
		return uint32(r / math.Ldexp(1, f.minNormalExp()-f.ManBits))
	}
	_, exp := math.Frexp(r)
	e := exp - 1
	m := uint32((math.Ldexp(r, -e) - 1) * math.Ldexp(1, f.ManBits))
	return uint32(e+f.Bias)<<f.ManBits | m
}
