package coll

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// The reference: what a collective must produce, from its definition alone (no schedule). Every
// executor's results are checked against it: coll.Execute's (exec_test.go), the CPU engine's and
// the GPU engine's (through the conformance kit, coll/colltest).

// Expect is what one element of a collective's result must hold.
type Expect struct {
	// Approx marks a floating-point reduction: the element's value must lie within Tol of Value
	// (Tol 0: equal to it, −0 and +0 alike). Otherwise the element's bits must equal Bits.
	Approx bool
	Bits   uint64
	Value  float64
	Tol    float64
}

// Holds reports whether an element of type dt with the given bits meets the expectation.
func (e Expect) Holds(dt DataType, bits uint64) bool {
	if !e.Approx {
		return bits == e.Bits
	}
	got := dt.Float(bits)
	return got == e.Value || math.Abs(got-e.Value) <= e.Tol || math.IsNaN(got) && math.IsNaN(e.Value)
}

// Describe writes the expectation for a failure message: "3.25", "3.25 ± 0.0078", or an
// integer's value.
func (e Expect) Describe(dt DataType) string {
	switch {
	case e.Approx && e.Tol > 0:
		return fmt.Sprintf("%v ± %.3g", e.Value, e.Tol)
	case e.Approx:
		return fmt.Sprint(e.Value)
	}
	return DescribeBits(dt, e.Bits)
}

// DescribeBits writes an element for a failure message: its value, and for floats its encoding.
func DescribeBits(dt DataType, b uint64) string {
	switch {
	case dt.IsFloat():
		return fmt.Sprintf("%v (%#0*x)", dt.Float(b), 2*dt.Size(), b)
	case dt.IsSigned():
		return strconv.FormatInt(int64(b), 10)
	}
	return strconv.FormatUint(b, 10)
}

// ReduceRef is the reference of one element of a reduction over len(in) ranks, in[q] being rank
// q's element (its bits). It follows NCCL's definitions (NCCL 2.28: ncclRedOp_t, and
// ncclRedOpCreatePreMulSum, whose scalar is converted to the element type):
//
// Integers reduce exactly, in two's-complement arithmetic wrapping at the type's width. Avg is the
// wrapped sum divided by the number of ranks, truncating toward zero; PreMulSum multiplies every
// input by the scalar truncated to an integer, then sums.
//
// Floats reduce in float64 from the inputs' values: Sum, Prod, Max and Min of the n values;
// PreMulSum Σ s·x_q, s being the scalar rounded to the type; Avg the same with s = 1/n rounded
// to the type (NCCL runs Avg on floats as a PreMulSum by 1/n). Max and Min are exact. The other
// results are exact, and checked as such, when no rounding can happen in any order of folding:
// every term (s·x_q, or each x_q of a product) is representable in the type, the scale s is
// exactly 1/n for Avg, and every partial sum or product fits the type's precision (for sums: all
// terms are multiples of a power of two q and Σ|terms| ≤ q·2^p, p the type's Precision; for
// products: the product of the terms' odd significands has at most p bits and no partial product
// leaves the type's range). Otherwise the tolerance is
//
//	Tol = n · (ε · M + δ)
//
// with ε the type's Epsilon (twice the unit roundoff), δ its SmallestPositive and M the
// magnitude folded (Σ|s·x_q| for sums, |Π x_q| for products): an executor rounds at most 2n−1
// times (n pre-multiplications and n−1 additions, or n−1 multiplications), each time by at most
// ε/2 of a partial result no larger than M (relative errors of products compound to about
// (n−1)·ε/2 of the product), or δ/2 among subnormals; for products δ is scaled by Π max(1, |x_q|),
// as the factors after a rounding magnify its error. Dividing the sum by n instead of
// pre-multiplying (coll.Execute does) stays within the same bound.
func ReduceRef(dt DataType, op RedOp, scalar float64, in []uint64) Expect {
	n := len(in)
	if n == 0 {
		return Expect{}
	}
	if !dt.IsFloat() {
		return Expect{Bits: reduceInt(dt, op, scalar, in)}
	}
	x := func(q int) float64 { return dt.Float(in[q]) }
	e := Expect{Approx: true}
	var mag float64
	grow := 1.0 // how much the factors after a rounding can magnify its error (products)
	exact := true
	switch op {
	case Max, Min:
		e.Value = x(0)
		for q := 1; q < n; q++ {
			if v := x(q); op == Max && v > e.Value || op == Min && v < e.Value {
				e.Value = v
			}
		}
		return e
	case Prod:
		sig := uint64(1)   // the product of the odd significands, which any partial product's divides
		lo, hi := 1.0, 1.0 // the smallest low bit and the largest magnitude of any partial product
		e.Value = 1
		for q := 0; q < n; q++ {
			v := x(q)
			e.Value *= v
			m, low := significand(v)
			over, prod := bits.Mul64(sig, m)
			exact = exact && over == 0
			sig = prod
			lo *= min(1, low)
			hi *= max(1, math.Abs(v))
		}
		mag, grow = math.Abs(e.Value), hi
		exact = exact && bits.Len64(sig) <= dt.Precision() && lo >= dt.SmallestPositive() && hi <= dt.MaxFinite()
	default: // Sum, Avg, PreMulSum
		s := 1.0
		switch op {
		case Avg:
			s = dt.Round(1 / float64(n))
			exact = n&(n-1) == 0 && s == 1/float64(n) // 1/n is exact in binary for powers of two only
		case PreMulSum:
			s = dt.Round(scalar)
		}
		low := math.Inf(1)
		for q := 0; q < n; q++ {
			t := x(q) * s
			e.Value += t
			mag += math.Abs(t)
			if t != 0 {
				_, l := significand(t)
				low = min(low, l)
			}
			exact = exact && dt.Round(t) == t
		}
		exact = exact && mag <= dt.MaxFinite() && (mag == 0 || mag <= math.Ldexp(low, dt.Precision()))
	}
	if !exact {
		e.Tol = float64(n) * (dt.Epsilon()*mag + dt.SmallestPositive()*grow)
	}
	return e
}

// significand returns v's significand with its trailing zero bits removed (an odd integer) and
// the value of its lowest set bit, so that v = ±m·low; 1 and 1 for zero, infinities and NaN.
func significand(v float64) (m uint64, low float64) {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 1, 1
	}
	b := math.Float64bits(v)
	exp := int(b>>52) & 0x7ff
	m = b & (1<<52 - 1)
	if exp == 0 {
		exp = 1 // subnormal: no leading one
	} else {
		m |= 1 << 52
	}
	tz := bits.TrailingZeros64(m)
	return m >> tz, math.Ldexp(1, exp-1075+tz)
}

// reduceInt is the integer reduction of ReduceRef.
func reduceInt(dt DataType, op RedOp, scalar float64, in []uint64) uint64 {
	less := func(a, b uint64) bool {
		if dt.IsSigned() {
			return int64(a) < int64(b)
		}
		return a < b
	}
	s := uint64(int64(scalar))
	var acc uint64
	for q, v := range in {
		if op == PreMulSum {
			v = dt.Wrap(v * s)
		}
		switch {
		case q == 0:
			acc = v
		case op == Prod:
			acc = dt.Wrap(acc * v)
		case op == Max:
			if less(acc, v) {
				acc = v
			}
		case op == Min:
			if less(v, acc) {
				acc = v
			}
		default: // Sum, Avg, PreMulSum
			acc = dt.Wrap(acc + v)
		}
	}
	if op == Avg {
		n := len(in)
		if dt.IsSigned() {
			return dt.Wrap(uint64(int64(acc) / int64(n)))
		}
		return acc / uint64(n)
	}
	return acc
}

// Reference answers, element by element, what a collective must produce, from its definition
// alone (no schedule): AllReduce folds all ranks, AllGather concatenates the ranks' buffers in rank
// order, ReduceScatter gives rank r the r-th block of the fold, Broadcast copies the root's
// buffer, Reduce folds into the root's, AllToAll sends block j of rank r to block r of rank j, and
// SendRecv delivers each transfer (the definitions nccl-tests checks, NCCL 2.28). Reductions follow
// ReduceRef. A Reference is not safe for concurrent use.
type Reference struct {
	p       Plan
	scalar  float64
	src     func(r int, j int64) uint64 // rank r's send element j (its bits)
	recvLen int64
	msgs    [][]p2pMsg // AllToAll and SendRecv: the messages each rank receives
	folds   []Expect   // reductions: the fold of each send element, computed once
	have    []bool
	in      []uint64
}

// NewReference prepares the reference of p (its Func, NRanks, Count, DataType, Op, Root, Peer and
// Transfers) for the ranks' send buffers send[r] (bytes of p.DataType); scalar is PreMulSum's.
// The buffers are read, not copied: they must not change while the Reference is used.
func NewReference(p *Plan, scalar float64, send [][]byte) (*Reference, error) {
	dt := p.DataType
	x, sendLen, err := newReference(p, scalar, func(r int, j int64) uint64 { return dt.Bits(send[r], int(j)) })
	if err != nil {
		return nil, err
	}
	if len(send) != p.NRanks {
		return nil, fmt.Errorf("coll: Reference: %d send buffers for %d ranks", len(send), p.NRanks)
	}
	elt := int64(dt.Size())
	for r := range send {
		if int64(len(send[r])) < sendLen*elt {
			return nil, fmt.Errorf("coll: Reference: rank %d: send buffer of %d bytes, want %d", r, len(send[r]), sendLen*elt)
		}
	}
	if p.Func == AllReduce || p.Func == Reduce || p.Func == ReduceScatter {
		// Every rank's Want of a reduction asks for the same folds: compute each once.
		x.folds = make([]Expect, sendLen)
		x.have = make([]bool, sendLen)
	}
	return x, nil
}

// NewReferenceOf prepares the reference of p for send buffers given element by element: in(r, j)
// is rank r's send element j (its bits). It keeps no per-element state (each Want of a reduction
// folds the ranks again), so that it suits one rank checking a large buffer.
func NewReferenceOf(p *Plan, scalar float64, in func(r int, j int64) uint64) (*Reference, error) {
	x, _, err := newReference(p, scalar, in)
	return x, err
}

func newReference(p *Plan, scalar float64, src func(r int, j int64) uint64) (x *Reference, sendLen int64, err error) {
	n, cnt := p.NRanks, p.Count
	elt := int64(p.DataType.Size())
	if elt == 0 {
		return nil, 0, fmt.Errorf("coll: Reference: unknown data type %v", p.DataType)
	}
	x = &Reference{p: *p, scalar: scalar, src: src}
	switch p.Func {
	case AllReduce, Broadcast, Reduce:
		sendLen, x.recvLen = cnt, cnt
	case AllGather:
		sendLen, x.recvLen = cnt, cnt*int64(n)
	case ReduceScatter:
		sendLen, x.recvLen = cnt*int64(n), cnt
	case AllToAll, SendRecv:
		s, r := sendRecvSizes(p)
		sendLen, x.recvLen = s/elt, r/elt
		if p.Func == AllToAll {
			sendLen, x.recvLen = cnt*int64(n), cnt*int64(n)
		}
		x.msgs = make([][]p2pMsg, n)
		for _, m := range p2pMessages(p) {
			x.msgs[m.to] = append(x.msgs[m.to], m)
		}
	default:
		return nil, 0, fmt.Errorf("coll: Reference: unknown function %v", p.Func)
	}
	if (p.Func == Broadcast || p.Func == Reduce) && (p.Root < 0 || p.Root >= n) {
		return nil, 0, fmt.Errorf("coll: Reference: root %d of %d ranks", p.Root, n)
	}
	if p.Func == AllReduce || p.Func == Reduce || p.Func == ReduceScatter {
		x.in = make([]uint64, n)
	}
	return x, sendLen, nil
}

// RecvCount is the number of elements of each rank's receive buffer.
func (x *Reference) RecvCount() int64 { return x.recvLen }

// Want says what element i of rank r's receive buffer must hold; ok is false where the collective
// writes nothing (a non-root's buffer in Reduce, elements no transfer reaches).
func (x *Reference) Want(r int, i int64) (e Expect, ok bool) {
	p := &x.p
	if i < 0 || i >= x.recvLen || r < 0 || r >= p.NRanks {
		return Expect{}, false
	}
	copyOf := func(q int, j int64) (Expect, bool) { return Expect{Bits: x.src(q, j)}, true }
	switch p.Func {
	case AllReduce:
		return x.fold(i), true
	case Reduce:
		if r != p.Root {
			return Expect{}, false
		}
		return x.fold(i), true
	case ReduceScatter:
		return x.fold(int64(r)*p.Count + i), true
	case Broadcast:
		return copyOf(p.Root, i)
	case AllGather:
		return copyOf(int(i/p.Count), i%p.Count)
	}
	for _, m := range x.msgs[r] {
		if i >= m.recvOff && i < m.recvOff+m.count {
			return copyOf(m.from, m.sendOff+i-m.recvOff)
		}
	}
	return Expect{}, false
}

// fold is the reduction of send element j over the ranks.
func (x *Reference) fold(j int64) Expect {
	if x.have != nil && x.have[j] {
		return x.folds[j]
	}
	for q := range x.in {
		x.in[q] = x.src(q, j)
	}
	e := ReduceRef(x.p.DataType, x.p.Op, x.scalar, x.in)
	if x.have != nil {
		x.folds[j], x.have[j] = e, true
	}
	return e
}
