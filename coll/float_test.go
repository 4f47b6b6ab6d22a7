package coll

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

var narrowFormats = []NarrowFormat{FormatHalf, FormatBfloat16, FormatE4M3, FormatE5M2}

// roundOracle is the rounding rule in float arithmetic (Encode works on bits): the value of the
// code Encode must return, or NaN.
func roundOracle(f NarrowFormat, x float64) float64 {
	if math.IsNaN(x) {
		return math.NaN()
	}
	a := math.Abs(x)
	maxFin := f.MaxFinite()
	overflow := math.Inf(1)
	if f.Saturate || !f.HasInf {
		overflow = maxFin
	}
	r := overflow
	if !math.IsInf(a, 0) {
		_, exp := math.Frexp(a)
		e := max(exp-1, f.minNormalExp())
		q := math.Ldexp(1, e-f.ManBits) // the spacing of representable values around a
		if r = math.RoundToEven(a/q) * q; r > maxFin {
			r = overflow
		}
	}
	return math.Copysign(r, x)
}

func TestNarrowFormatKnownValues(t *testing.T) {
	cases := []struct {
		f    NarrowFormat
		v    float64
		code uint16
	}{
		{FormatHalf, 1, 0x3c00}, {FormatHalf, 65504, 0x7bff}, {FormatHalf, 65520, 0x7c00}, {FormatHalf, -2, 0xc000},
		{FormatHalf, math.Ldexp(1, -24), 0x0001}, {FormatHalf, math.Ldexp(1, -25), 0x0000}, {FormatHalf, math.Ldexp(3, -26), 0x0001},
		{FormatHalf, 1 + math.Ldexp(1, -11), 0x3c00}, {FormatHalf, 1 + 3*math.Ldexp(1, -11), 0x3c02}, {FormatHalf, math.Inf(-1), 0xfc00},
		{FormatHalf, 0.333251953125, 0x3555}, {FormatHalf, math.Ldexp(1, -14), 0x0400}, {FormatHalf, math.NaN(), 0x7fff},
		{FormatBfloat16, 1, 0x3f80}, {FormatBfloat16, 1 + 1.0/256, 0x3f80}, {FormatBfloat16, 1 + 3.0/256, 0x3f82},
		{FormatBfloat16, -3, 0xc040}, {FormatBfloat16, math.Inf(1), 0x7f80}, {FormatBfloat16, math.MaxFloat32, 0x7f80},
		{FormatE4M3, 448, 0x7e}, {FormatE4M3, 1000, 0x7e}, {FormatE4M3, 500, 0x7e}, {FormatE4M3, -448, 0xfe},
		{FormatE4M3, math.Inf(-1), 0xfe}, {FormatE4M3, math.Inf(1), 0x7e}, {FormatE4M3, 1, 0x38}, {FormatE4M3, math.Ldexp(1, -9), 0x01},
		{FormatE4M3, math.Ldexp(1, -10), 0x00}, {FormatE4M3, 464, 0x7e}, {FormatE4M3, 1.0625, 0x38}, {FormatE4M3, 1.1875, 0x3a},
		{FormatE4M3, 0.5, 0x30}, {FormatE4M3, math.NaN(), 0x7f},
		{FormatE5M2, 57344, 0x7b}, {FormatE5M2, 1e6, 0x7b}, {FormatE5M2, 1, 0x3c}, {FormatE5M2, math.Ldexp(1, -16), 0x01},
		{FormatE5M2, -2, 0xc0}, {FormatE5M2, 1.125, 0x3c}, {FormatE5M2, 1.375, 0x3e},
	}
	for _, c := range cases {
		require.Equal(t, c.code, c.f.Encode(c.v), "%s.Encode(%g)", c.f.Name, c.v)
	}
	require.Equal(t, 448.0, FormatE4M3.MaxFinite())
	require.Equal(t, 57344.0, FormatE5M2.MaxFinite())
	require.Equal(t, 65504.0, FormatHalf.MaxFinite())
	require.Equal(t, math.Ldexp(1, -24), FormatHalf.SmallestPositive())
	require.True(t, math.IsNaN(FormatE4M3.Decode(0xff)) && math.IsInf(FormatE5M2.Decode(0x7c), 1) && math.IsNaN(FormatE5M2.Decode(0x7d)))
}

// Every code survives decode then encode (zeros keep their sign, every NaN becomes the canonical
// one, a saturating format's infinities its largest finite), and the per-format functions agree with Decode on every code.
func TestNarrowFormatRoundTrip(t *testing.T) {
	for _, f := range narrowFormats {
		for c := 0; c < 1<<(1+f.ExpBits+f.ManBits); c++ {
			code := uint16(c)
			want := code
			switch v := f.Decode(code); {
			case math.IsNaN(v):
				want = f.NaN()
			case math.IsInf(v, 0) && f.Saturate:
				want = code&f.SignBit() | f.Encode(f.MaxFinite())
			}
			require.Equal(t, want, f.Encode(f.Decode(code)), "%s: code %#x (%g)", f.Name, code, f.Decode(code))
		}
	}
	same := func(a float64, b float32) bool { return a == float64(b) || math.IsNaN(a) && b != b }
	for c := 0; c < 1<<16; c++ {
		require.True(t, same(FormatHalf.Decode(uint16(c)), HalfToFloat32(uint16(c))), "half %#x", c)
		require.True(t, same(FormatBfloat16.Decode(uint16(c)), Bfloat16ToFloat32(uint16(c))), "bfloat16 %#x", c)
	}
	for c := 0; c < 1<<8; c++ {
		require.True(t, same(FormatE4M3.Decode(uint16(c)), E4M3ToFloat32(uint8(c))), "e4m3 %#x", c)
		require.True(t, same(FormatE5M2.Decode(uint16(c)), E5M2ToFloat32(uint8(c))), "e5m2 %#x", c)
	}
}

// Encode and the per-format float32 functions round as the float-arithmetic rule does at every
// rounding boundary (each midpoint between neighbouring values, the values either side of it,
// and past the largest finite), and on random float32 values.
func TestNarrowFormatRounding(t *testing.T) {
	perFormat := map[string]func(float32) uint16{
		"half":     Float32ToHalf,
		"bfloat16": Float32ToBfloat16,
		"f8e4m3":   func(v float32) uint16 { return uint16(Float32ToE4M3(v)) },
		"f8e5m2":   func(v float32) uint16 { return uint16(Float32ToE5M2(v)) },
	}
	check := func(f NarrowFormat, x float64) { // plain ifs: a million calls
		want := roundOracle(f, x)
		got := f.Encode(x)
		if !(f.Decode(got) == want || math.IsNaN(want) && got == f.NaN()) {
			t.Fatalf("%s.Encode(%g) = %#x (%g), want %g", f.Name, x, got, f.Decode(got), want)
		}
		if x32 := float32(x); float64(x32) == x {
			if g := perFormat[f.Name](x32); g != got {
				t.Fatalf("%s of float32 %g = %#x, Encode gives %#x", f.Name, x, g, got)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range narrowFormats {
		top := uint16(1)<<(f.ExpBits+f.ManBits) - 1 // positive codes 0..top
		for c := uint16(0); c < top; c++ {
			lo, hi := f.Decode(c), f.Decode(c+1)
			if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(hi, 0) {
				continue
			}
			mid := (lo + hi) / 2
			for _, x := range []float64{lo, mid, math.Nextafter(mid, 0), math.Nextafter(mid, 1e300),
				float64(math.Nextafter32(float32(mid), 0)), float64(math.Nextafter32(float32(mid), 1e30))} {
				check(f, x)
				check(f, -x)
			}
		}
		mf := f.MaxFinite()
		for _, x := range []float64{mf, mf * 1.01, mf * 2, math.MaxFloat32, math.Inf(1), math.NaN(), math.SmallestNonzeroFloat64, f.SmallestPositive() / 2} {
			check(f, x)
			check(f, -x)
		}
		for i := 0; i < 10000; i++ {
			check(f, float64(math.Float32frombits(r.Uint32())))
		}
	}
}
