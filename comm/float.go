package comm

import (
	"math"
	"sort"
)

// Conversions between float32 and the narrow float formats NCCL reduces (fact sheet §8.1):
// IEEE binary16 (half), bfloat16, and the OCP 8-bit formats E4M3 (the "FN" variant: no infinities,
// NaN = S.1111.111, largest 448) and E5M2 (IEEE-like: infinities, largest finite 57344). Narrowing
// rounds to nearest, ties to even. Half and bfloat16 overflow to infinity (as __float2half_rn and
// __float2bfloat16_rn do); the 8-bit formats saturate to the largest finite value, as CUDA's
// __nv_fp8_e4m3/__nv_fp8_e5m2 constructors do (__NV_SATFINITE), with NaN kept NaN.

// HalfToFloat32 widens an IEEE binary16 value.
func HalfToFloat32(h uint16) float32 { return halfTable[h] }

var halfTable = func() (t [1 << 16]float32) {
	for i := range t {
		t[i] = halfDecode(uint16(i))
	}
	return
}()

func halfDecode(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: man × 2^-24
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// Float32ToHalf narrows to IEEE binary16, rounding to nearest even; overflow gives infinity.
func Float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 // quiet NaN
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

// Bfloat16ToFloat32 widens a bfloat16 value.
func Bfloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBfloat16 narrows to bfloat16, rounding to nearest even; NaN stays NaN.
func Float32ToBfloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// fp8 is one 8-bit format: its 256 decoded values and the sorted positive finite ones for encoding.
type fp8 struct {
	dec       [256]float32
	pos       []float32 // positive finite values in increasing order (including 0)
	code      []uint8   // code of pos[i]
	nan       uint8
	maxFinite float32
}

func newFP8(expBits, manBits, bias int, ieee bool) *fp8 {
	f := &fp8{}
	for c := 0; c < 256; c++ {
		s := c >> 7
		e := (c >> manBits) & (1<<expBits - 1)
		m := c & (1<<manBits - 1)
		var v float64
		switch {
		case ieee && e == 1<<expBits-1:
			if m == 0 {
				v = math.Inf(1)
			} else {
				v = math.NaN()
			}
		case !ieee && e == 1<<expBits-1 && m == 1<<manBits-1:
			v = math.NaN()
		case e == 0:
			v = math.Ldexp(float64(m), 1-bias-manBits)
		default:
			v = math.Ldexp(float64(m|1<<manBits), e-bias-manBits)
		}
		if s == 1 {
			v = -v
		}
		f.dec[c] = float32(v)
		if s == 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			f.pos = append(f.pos, float32(v))
			f.code = append(f.code, uint8(c))
		}
	}
	idx := make([]int, len(f.pos))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return f.pos[idx[a]] < f.pos[idx[b]] })
	pos := make([]float32, len(idx))
	code := make([]uint8, len(idx))
	for i, j := range idx {
		pos[i], code[i] = f.pos[j], f.code[j]
	}
	f.pos, f.code = pos, code
	f.maxFinite = pos[len(pos)-1]
	if ieee {
		f.nan = uint8((1<<expBits-1)<<manBits | 1<<(manBits-1))
	} else {
		f.nan = 0x7f
	}
	return f
}

// encode rounds to nearest (ties to the even code), saturating to the largest finite value.
func (f *fp8) encode(v float32) uint8 {
	if v != v {
		return f.nan
	}
	var sign uint8
	if math.Signbit(float64(v)) {
		sign, v = 0x80, -v
	}
	if v >= f.maxFinite {
		return sign | f.code[len(f.code)-1]
	}
	i := sort.Search(len(f.pos), func(i int) bool { return f.pos[i] >= v })
	if f.pos[i] == v {
		return sign | f.code[i]
	}
	lo, hi := f.pos[i-1], f.pos[i]
	// Compare v to the midpoint in float64, where it is exact.
	mid := (float64(lo) + float64(hi)) / 2
	switch {
	case float64(v) < mid:
		return sign | f.code[i-1]
	case float64(v) > mid:
		return sign | f.code[i]
	}
	if f.code[i-1]&1 == 0 {
		return sign | f.code[i-1]
	}
	return sign | f.code[i]
}

var (
	fp8e4m3 = newFP8(4, 3, 7, false)
	fp8e5m2 = newFP8(5, 2, 15, true)
)

// E4M3ToFloat32 and the other fp8 helpers convert single values (exported for tests and tools).
func E4M3ToFloat32(c uint8) float32 { return fp8e4m3.dec[c] }
func Float32ToE4M3(v float32) uint8 { return fp8e4m3.encode(v) }
func E5M2ToFloat32(c uint8) float32 { return fp8e5m2.dec[c] }
func Float32ToE5M2(v float32) uint8 { return fp8e5m2.encode(v) }
