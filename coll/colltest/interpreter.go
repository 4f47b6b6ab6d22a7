package colltest

import (
	"fmt"
	"math"

	"github.com/simccl/simccl/coll"
)

// Interpreter is an Executor over coll's reference interpreter: each call is compiled
// (coll.Compile) from Plan, with the call's function, count, type, reduction and root filled in,
// and run by coll.Execute on float64 values, so it needs Options.Values. Plan chooses the
// algorithm, protocol, channels and chunking; the matrix must keep to the functions the
// algorithm compiles (coll's Supported).
type Interpreter struct {
	Plan coll.Plan
	// Sequential runs every program in list order (coll.ExecOptions.Sequential).
	Sequential bool
}

// Open returns a world of n ranks.
func (in Interpreter) Open(n int) (World, error) {
	if n < 1 {
		return nil, fmt.Errorf("colltest: Interpreter: %d ranks", n)
	}
	return interpWorld{in, n}, nil
}

type interpWorld struct {
	Interpreter
	n int
}

func (w interpWorld) Close() error { return nil }

// Run compiles and executes the call. Values go through float64: each element is decoded before
// and encoded after, and an element Execute leaves at its value keeps its bits.
func (w interpWorld) Run(c Call, bufs []Buffers) error {
	if len(bufs) != w.n {
		return fmt.Errorf("colltest: Interpreter: %d buffers for %d ranks", len(bufs), w.n)
	}
	p := w.Plan
	p.Func, p.NRanks, p.Count, p.DataType, p.Op, p.Root, p.Peer = c.Func, w.n, int64(c.Count), c.DataType, c.Op, c.Root, 1
	s, err := coll.Compile(p)
	if err != nil {
		return err
	}
	dt := c.DataType
	elt := dt.Size()
	op := &s.Ops[0]
	decode := func(b []byte) []float64 {
		v := make([]float64, len(b)/elt)
		for i := range v {
			v[i] = dt.Value(b, i)
		}
		return v
	}
	eb := make([]coll.Buffers, w.n)
	for r, b := range bufs {
		if c.InPlace {
			so, ro := op.InPlaceOffsets(r)
			if so != int64(b.SendOffset) || ro != int64(b.RecvOffset) || int64(len(b.Whole)) < op.InPlaceBytes() {
				return fmt.Errorf("colltest: Interpreter: rank %d: in-place layout (%d, %d) in %d bytes, coll's is (%d, %d) in %d",
					r, b.SendOffset, b.RecvOffset, len(b.Whole), so, ro, op.InPlaceBytes())
			}
			eb[r] = coll.Buffers{Recv: decode(b.Whole)}
		} else {
			eb[r] = coll.Buffers{Send: decode(b.Send), Recv: decode(b.Recv)}
		}
	}
	before := make([][]float64, w.n)
	for r := range eb {
		before[r] = append([]float64(nil), eb[r].Recv...)
	}
	scalar := dt.Round(c.Scalar) // NCCL converts PreMulSum's scalar to the element type (0 stands for 1 here)
	if _, err := coll.Execute(s, [][]coll.Buffers{eb}, coll.ExecOptions{InPlace: c.InPlace, Sequential: w.Sequential, Scalar: scalar}); err != nil {
		return err
	}
	for r, b := range bufs {
		out := b.Recv
		if c.InPlace {
			out = b.Whole
		}
		for i, v := range eb[r].Recv {
			if math.Float64bits(v) != math.Float64bits(before[r][i]) {
				dt.SetValue(out, i, v)
			}
		}
	}
	return nil
}
