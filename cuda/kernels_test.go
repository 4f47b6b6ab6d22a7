package cuda

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/simccl/simccl/coll"
)

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

func isNaNBits(t coll.DataType, v uint64) bool {
	switch t {
	case coll.Float32:
		return math.IsNaN(float64(math.Float32frombits(uint32(v))))
	case coll.Float64:
		return math.IsNaN(math.Float64frombits(v))
	}
	if f, ok := t.Narrow(); ok {
		return f.IsNaN(uint16(v))
	}
	return false
}

// randomElt draws a random bit pattern of type t: any integer, any finite float.
func randomElt(r *rand.Rand, t coll.DataType) uint64 {
	for {
		v := r.Uint64() & sizeMask(t)
		switch t {
		case coll.Float32:
			if f := float64(math.Float32frombits(uint32(v))); math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
		case coll.Float64:
			if f := math.Float64frombits(v); math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
		default:
			if f, ok := t.Narrow(); ok && !f.IsFinite(uint16(v)) {
				continue
			}
		}
		return v
	}
}

type reduceCase struct {
	op     coll.RedOp
	scalar float64
	flags  uint32
}

func (c reduceCase) String() string {
	if c.op == coll.PreMulSum {
		return fmt.Sprintf("premulsum(%g, flags %d)", c.scalar, c.flags)
	}
	return c.op.String()
}

// TestReduceKernels checks every datatype × op against refReduce, bit for bit (NaN matches any
// NaN), on random inputs: a large aligned run (16-byte vector path plus tail) and a small run
// whose pointers are one element off alignment (element path). Outputs are poisoned first.
func TestReduceKernels(t *testing.T) {
	d := needDevices(t, 1)[0]
	k := kernelsFor(t, d)
	r := rand.New(rand.NewPCG(rand.Uint64(), 1))
	const nBig, nSmall = 200003, 4099
	for ty := coll.DataType(0); ty < coll.NumDataTypes; ty++ {
		size := ty.Size()
		scalar := 0.3
		if isIntType(ty) {
			scalar = 3
		}
		cases := []reduceCase{{coll.Sum, 0, 0}, {coll.Prod, 0, 0}, {coll.Min, 0, 0}, {coll.Max, 0, 0},
			{coll.PreMulSum, scalar, ScaleA | ScaleB}, {coll.PreMulSum, -scalar, ScaleA}}
		a := make([]byte, nBig*size)
		b := make([]byte, nBig*size)
		for i := 0; i < nBig; i++ {
			putElt(a, i, size, randomElt(r, ty))
			putElt(b, i, size, randomElt(r, ty))
		}
		got := make([]byte, nBig*size)
		for _, rc := range cases {
			for _, layout := range []struct{ n, off int }{{nBig, 0}, {nSmall, 1}} {
				n, off := layout.n, layout.off*size
				err := d.Do(func(c *Ctx) error {
					bytesN := nBig*size + 16
					var p [3]DevPtr
					for i := range p {
						var err error
						if p[i], err = c.Alloc(bytesN); err != nil {
							return err
						}
						defer c.Free(p[i])
					}
					if err := c.CopyHtoD(p[0].Add(off), a[:n*size]); err != nil {
						return err
					}
					if err := c.CopyHtoD(p[1].Add(off), b[:n*size]); err != nil {
						return err
					}
					if err := c.Memset(p[2], 0xa5, bytesN); err != nil {
						return err
					}
					if err := k.Reduce(c, 0, ty, rc.op, p[2].Add(off), p[0].Add(off), p[1].Add(off), n, rc.scalar, rc.flags); err != nil {
						return err
					}
					if err := c.Synchronize(); err != nil {
						return err
					}
					return c.CopyDtoH(got[:n*size], p[2].Add(off))
				})
				if err != nil {
					t.Fatalf("%v %v: %v", ty, rc, err)
				}
				sBits := ScalarBits(ty, rc.scalar)
				bad := 0
				for i := 0; i < n; i++ {
					x, y := getElt(a, i, size), getElt(b, i, size)
					want := refReduce(ty, rc.op, x, y, sBits, rc.flags)
					g := getElt(got, i, size)
					if g != want && !(isNaNBits(ty, g) && isNaNBits(ty, want)) {
						if bad < 3 {
							t.Errorf("%v %v (n %d, offset %d): element %d: op(%#x, %#x) = %#x, want %#x", ty, rc, n, layout.off, i, x, y, g, want)
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%v %v (n %d, offset %d): %d of %d elements wrong", ty, rc, n, layout.off, bad, n)
				}
			}
		}
	}
}

// TestDivideKernels checks the integer division that completes Avg on integer types.
func TestDivideKernels(t *testing.T) {
	d := needDevices(t, 1)[0]
	k := kernelsFor(t, d)
	r := rand.New(rand.NewPCG(rand.Uint64(), 2))
	const n = 10007
	for ty := coll.Int8; ty <= coll.Uint64; ty++ {
		size := ty.Size()
		in := make([]byte, n*size)
		for i := 0; i < n; i++ {
			putElt(in, i, size, randomElt(r, ty))
		}
		got := make([]byte, n*size)
		err := d.Do(func(c *Ctx) error {
			p, err := c.Alloc(2 * n * size)
			if err != nil {
				return err
			}
			defer c.Free(p)
			if err := c.CopyHtoD(p, in); err != nil {
				return err
			}
			if err := k.Divide(c, 0, ty, p.Add(n*size), p, n, 3); err != nil {
				return err
			}
			if err := c.Synchronize(); err != nil {
				return err
			}
			return c.CopyDtoH(got, p.Add(n*size))
		})
		if err != nil {
			t.Fatalf("%v: %v", ty, err)
		}
		for i := 0; i < n; i++ {
			x := getElt(in, i, size)
			var want uint64
			if ty.IsSigned() {
				sh := uint(64 - 8*size)
				want = uint64((int64(x<<sh)>>sh)/3) & sizeMask(ty)
			} else {
				want = x / 3
			}
			if g := getElt(got, i, size); g != want {
				t.Fatalf("%v: %#x / 3 = %#x, want %#x", ty, x, g, want)
			}
		}
	}
}

func TestReduceRejectsBadInput(t *testing.T) {
	d := needDevices(t, 1)[0]
	k := kernelsFor(t, d)
	err := d.Do(func(c *Ctx) error {
		if err := k.Reduce(c, 0, coll.Float32, coll.Avg, 0, 0, 0, 10, 0, 0); err == nil {
			return fmt.Errorf("Avg accepted")
		}
		if err := k.Reduce(c, 0, coll.DataType(99), coll.Sum, 0, 0, 0, 10, 0, 0); err == nil {
			return fmt.Errorf("type 99 accepted")
		}
		if err := k.Divide(c, 0, coll.Float32, 0, 0, 10, 2); err == nil {
			return fmt.Errorf("float divide accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkLLKernels checks the line kernels of protocol p (LL or LL128) on device d: a message
// packed into lines (flag f) is unpacked and reduced by kernels enqueued on other streams before
// the sender's kernels, over lines holding a stale message of flag f-1, every type × op, counts
// 1, 13, 1031 and 9001 (several rounds of the grid) with the local input and output one element
// off alignment; results bit for bit against refReduce, and the lines read hold no flag
// afterwards (LL: zero lines; LL128: zero flag words).
func checkLLKernels(t *testing.T, d *Device, k *Kernels, proto coll.Proto) {
	r := rand.New(rand.NewPCG(rand.Uint64(), 3))
	for ty := coll.DataType(0); ty < coll.NumDataTypes; ty++ {
		size := ty.Size()
		for _, n := range []int{1, 13, 1031, 9001} {
			msg, stale, loc := make([]byte, n*size), make([]byte, n*size), make([]byte, n*size)
			for i := 0; i < n; i++ {
				putElt(msg, i, size, randomElt(r, ty))
				putElt(stale, i, size, randomElt(r, ty))
				putElt(loc, i, size, randomElt(r, ty))
			}
			for _, rc := range []reduceCase{{coll.Sum, 0, 0}, {coll.Prod, 0, 0}, {coll.Min, 0, 0}, {coll.Max, 0, 0}, {coll.PreMulSum, 3, ScaleB}} {
				const f = 77
				wire := int(LineWire(proto, int64(n*size)))
				var copied, fwd, reduced, fwdRed []byte
				err := d.Do(func(c *Ctx) error {
					var p [9]DevPtr // src, lines, dst, lines2, local, out, lines3, stale, linesB
					for i := range p {
						var err error
						if p[i], err = c.Alloc(wire + 64); err != nil {
							return err
						}
						defer c.Free(p[i])
					}
					src, lines, dst, lines2, local, out, lines3, st, linesB := p[0], p[1], p[2], p[3], p[4].Add(size), p[5].Add(size), p[6], p[7], p[8]
					if err := c.CopyHtoD(src, msg); err != nil {
						return err
					}
					if err := c.CopyHtoD(st, stale); err != nil {
						return err
					}
					if err := c.CopyHtoD(local, loc); err != nil {
						return err
					}
					for _, q := range []DevPtr{dst, out} {
						if err := c.Memset(q, 0xa5, n*size); err != nil {
							return err
						}
					}
					// the stale message, flag f-1, in the lines first
					for _, l := range []DevPtr{lines, linesB} {
						if err := c.Memset(l, 0, wire); err != nil {
							return err
						}
						if err := k.LineCopy(c, 0, proto, 0, st, 0, 0, l, f-1, n*size); err != nil {
							return err
						}
					}
					if err := c.Synchronize(); err != nil {
						return err
					}
					var ss [3]Stream
					for i := range ss {
						var err error
						if ss[i], err = c.NewStream(); err != nil {
							return err
						}
						defer c.DestroyStream(ss[i])
					}
					// receivers first, on their own streams: only the flags order them after the sender
					if err := k.LineCopy(c, ss[1], proto, dst, 0, lines, f, lines2, f+1, n*size); err != nil {
						return err
					}
					if err := k.LineReduce(c, ss[2], proto, ty, rc.op, out, local, linesB, f, lines3, f+2, n, rc.scalar, rc.flags); err != nil {
						return err
					}
					if err := k.LineCopy(c, ss[0], proto, 0, src, 0, 0, lines, f, n*size); err != nil {
						return err
					}
					if err := k.LineCopy(c, ss[0], proto, 0, src, 0, 0, linesB, f, n*size); err != nil {
						return err
					}
					if err := c.Synchronize(); err != nil {
						return err
					}
					// the receivers zeroed the lines they read
					zero := make([]byte, 2*wire)
					if err := c.CopyDtoH(zero[:wire], lines); err != nil {
						return err
					}
					if err := c.CopyDtoH(zero[wire:], linesB); err != nil {
						return err
					}
					if proto == coll.LL128 { // only the flag words are zeroed
						for i := LL128LinePayload; i < len(zero); i += LL128LineBytes {
							if !bytes.Equal(zero[i:i+8], make([]byte, 8)) {
								return fmt.Errorf("LL128 line %d: flag not zero after it was read", i/LL128LineBytes)
							}
						}
					} else if !bytes.Equal(zero, make([]byte, 2*wire)) {
						return fmt.Errorf("LL lines not zero after they were read")
					}
					// the forwarded lines, unpacked again
					copied, fwd, reduced, fwdRed = make([]byte, n*size), make([]byte, n*size), make([]byte, n*size), make([]byte, n*size)
					if err := k.LineCopy(c, 0, proto, src, 0, lines2, f+1, 0, 0, n*size); err != nil {
						return err
					}
					if err := k.LineCopy(c, 0, proto, st, 0, lines3, f+2, 0, 0, n*size); err != nil {
						return err
					}
					if err := c.Synchronize(); err != nil {
						return err
					}
					for _, cp := range []struct {
						b []byte
						p DevPtr
					}{{copied, dst}, {fwd, src}, {reduced, out}, {fwdRed, st}} {
						if err := c.CopyDtoH(cp.b, cp.p); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("%v %v %v n %d: %v", proto, ty, rc, n, err)
				}
				if !bytes.Equal(copied, msg) || !bytes.Equal(fwd, msg) {
					t.Fatalf("%v %v n %d: copy or its forwarded lines differ from the message", proto, ty, n)
				}
				sBits := ScalarBits(ty, rc.scalar)
				for i := 0; i < n; i++ {
					want := refReduce(ty, rc.op, getElt(loc, i, size), getElt(msg, i, size), sBits, rc.flags)
					for _, b := range [][]byte{reduced, fwdRed} {
						if g := getElt(b, i, size); g != want && !(isNaNBits(ty, g) && isNaNBits(ty, want)) {
							t.Fatalf("%v %v %v n %d: element %d: %#x, want %#x", proto, ty, rc, n, i, g, want)
						}
					}
				}
			}
		}
	}
}

// TestLLKernels runs checkLLKernels on a GPU.
func TestLLKernels(t *testing.T) {
	d := needDevices(t, 1)[0]
	checkLLKernels(t, d, kernelsFor(t, d), coll.LL)
}

// TestLL128Kernels runs checkLLKernels on a GPU with LL128 lines.
func TestLL128Kernels(t *testing.T) {
	d := needDevices(t, 1)[0]
	checkLLKernels(t, d, kernelsFor(t, d), coll.LL128)
}

// TestEmulatorLLKernels runs checkLLKernels on the emulated driver.
func TestEmulatorLLKernels(t *testing.T) {
	withEmulator(t, 1, func(_ *emu, ds []*Device) {
		var k *Kernels
		if err := ds[0].Do(func(c *Ctx) (err error) { k, err = c.LoadKernels(); return }); err != nil {
			t.Fatal(err)
		}
		checkLLKernels(t, ds[0], k, coll.LL)
		checkLLKernels(t, ds[0], k, coll.LL128)
	})
}

func TestLLRejectsBadInput(t *testing.T) {
	withEmulator(t, 1, func(_ *emu, ds []*Device) {
		err := ds[0].Do(func(c *Ctx) error {
			k, err := c.LoadKernels()
			if err != nil {
				return err
			}
			p, _ := c.Alloc(256)
			for i, bad := range []error{
				k.LLCopy(c, 0, p, p, p, 1, 0, 0, 8),                                 // raw and LL source
				k.LLCopy(c, 0, p, 0, p, 0, 0, 0, 8),                                 // flag 0
				k.LLCopy(c, 0, 0, p, 0, 0, 0, 0, 8),                                 // no destination
				k.LLCopy(c, 0, 0, p, 0, 0, p+8, 1, 8),                               // unaligned lines
				k.LLReduce(c, 0, coll.Float32, coll.Sum, p, 0, p, 1, 0, 0, 2, 0, 0), // no local input
				k.LLReduce(c, 0, coll.Float32, coll.Avg, p, p, p, 1, 0, 0, 2, 0, 0), // Avg
				k.LL128Copy(c, 0, 0, p, 0, 0, p+16, 1, 8),                           // LL128 lines not 128-byte aligned
				k.LL128Reduce(c, 0, coll.Float32, coll.Sum, p, p, p+64, 1, 0, 0, 2, 0, 0),
				k.LineCopy(c, 0, coll.Simple, 0, p, 0, 0, p, 1, 8), // no line kernels for Simple
			} {
				if bad == nil {
					return fmt.Errorf("bad call %d accepted", i)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
