package comm

import (
	"math"
	"testing"
)

func TestNarrowFloatKnownValues(t *testing.T) {
	half := []struct {
		f float32
		h uint16
	}{{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {float32(math.Ldexp(1, -24)), 0x0001},
		{float32(math.Ldexp(1, -25)), 0x0000}, {float32(math.Ldexp(3, -26)), 0x0001}, {1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02},
		{float32(math.Inf(-1)), 0xfc00}, {0.333251953125, 0x3555}, {float32(math.Ldexp(1, -14)), 0x0400}}
	for _, c := range half {
		if got := Float32ToHalf(c.f); got != c.h {
			t.Errorf("Float32ToHalf(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if h := Float32ToHalf(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#04x", h)
	}
	bf := []struct {
		f float32
		h uint16
	}{{1, 0x3f80}, {1 + 1.0/256, 0x3f80}, {1 + 3.0/256, 0x3f82}, {-3, 0xc040}, {float32(math.MaxFloat32), 0x7f80}}
	for _, c := range bf {
		if got := Float32ToBfloat16(c.f); got != c.h {
			t.Errorf("Float32ToBfloat16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	e4 := []struct {
		f float32
		c uint8
	}{{1, 0x38}, {448, 0x7e}, {500, 0x7e}, {-448, 0xfe}, {float32(math.Ldexp(1, -9)), 0x01}, {float32(math.Ldexp(1, -10)), 0x00},
		{float32(math.Inf(1)), 0x7e}, {1.0625, 0x38}, {1.1875, 0x3a}, {0.5, 0x30}}
	for _, c := range e4 {
		if got := Float32ToE4M3(c.f); got != c.c {
			t.Errorf("Float32ToE4M3(%v) = %#02x, want %#02x", c.f, got, c.c)
		}
	}
	e5 := []struct {
		f float32
		c uint8
	}{{1, 0x3c}, {57344, 0x7b}, {1e6, 0x7b}, {float32(math.Ldexp(1, -16)), 0x01}, {-2, 0xc0}, {1.125, 0x3c}, {1.375, 0x3e}}
	for _, c := range e5 {
		if got := Float32ToE5M2(c.f); got != c.c {
			t.Errorf("Float32ToE5M2(%v) = %#02x, want %#02x", c.f, got, c.c)
		}
	}
	if Float32ToE4M3(float32(math.NaN())) != 0x7f || !math.IsNaN(float64(E4M3ToFloat32(0xff))) || E4M3ToFloat32(0x7e) != 448 {
		t.Errorf("e4m3 NaN/max handling")
	}
	if !math.IsInf(float64(E5M2ToFloat32(0x7c)), 1) || !math.IsNaN(float64(E5M2ToFloat32(0x7d))) {
		t.Errorf("e5m2 inf/NaN decoding")
	}
}

// Every finite code survives decode → encode, for all four narrow formats.
func TestNarrowFloatRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := HalfToFloat32(uint16(h))
		if f == f && Float32ToHalf(f) != uint16(h) {
			t.Fatalf("half %#04x -> %v -> %#04x", h, f, Float32ToHalf(f))
		}
		b := Bfloat16ToFloat32(uint16(h))
		if b == b && Float32ToBfloat16(b) != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, b, Float32ToBfloat16(b))
		}
	}
	for c := 0; c < 256; c++ {
		if f := E4M3ToFloat32(uint8(c)); f == f && Float32ToE4M3(f) != uint8(c) {
			t.Fatalf("e4m3 %#02x -> %v -> %#02x", c, f, Float32ToE4M3(f))
		}
		if f := E5M2ToFloat32(uint8(c)); f == f && !math.IsInf(float64(f), 0) && Float32ToE5M2(f) != uint8(c) {
			t.Fatalf("e5m2 %#02x -> %v -> %#02x", c, f, Float32ToE5M2(f))
		}
	}
}
