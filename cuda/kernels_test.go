package cuda

import (
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
