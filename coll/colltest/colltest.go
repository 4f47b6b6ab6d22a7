// Package colltest is the collective conformance kit every simccl executor runs, in the manner of
// testing/slogtest and realnet/realnettest: every collective (AllReduce, Reduce, ReduceScatter,
// Broadcast, AllGather, AllToAll, SendRecv) × the 12 data types × the 6 reductions × odd counts ×
// in place and out of place × rank counts, on deterministic inputs, checked element by element
// against one reference (coll.Reference and coll.ReduceRef: float64 for floats, exact wrapping
// arithmetic for integers, one documented tolerance).
//
// An executor provides the smallest thing the kit needs: a World of n ranks that makes one call
// on every rank with the given buffers and returns when the results are in the receive buffers.
// Executors whose ranks run apart (one goroutine or one process per rank) wrap a per-rank
// function; EachRank runs one per goroutine.
//
// Usage, in a test:
//
//	func TestConformance(t *testing.T) {
//		colltest.Run(t, colltest.ExecutorFunc(func(n int) (colltest.World, error) {
//			return openMyWorld(n) // a World: Run(call, bufs) and Close
//		}), colltest.Options{})
//	}
//
// The default matrix (Default) keeps CI short; -long, or SIMCCL_LONG=1, runs the exhaustive one
// (Exhaustive). Options narrow either for an executor whose calls are slow (MaxRanks, a smaller
// Matrix) or skip what it does not support (Skip). A run logs "N cases, W wrong elements" per
// world and in total. A process that runs one rank of a world (a multi-process test) walks
// Matrix.Cases in the same order on every rank and checks its own rank with Case.Check.
//
// The inputs make most reductions exact: integers are random over the type's whole range (so
// wrapping is exercised), floats small multiples of 1/4 (of 1 for fp8) whose sums over up to 8
// ranks are exact in the type, products of ±1, ±2 and ±1/2, PreMulSum's scalar 0.75 (3 for
// integers). Avg (non-power-of-two rank counts) and PreMulSum round, and are checked within
// coll.ReduceRef's tolerance. Options.Values asks for inputs an executor computing in float64
// carries exactly (small integers; no arbitrary bit patterns in the copies): coll.Execute's.
package colltest

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/stretchr/testify/require"
)

var long = flag.Bool("long", os.Getenv("SIMCCL_LONG") == "1", "colltest: run the exhaustive conformance matrix (also SIMCCL_LONG=1)")

// Long reports whether the exhaustive matrix is asked for: -long or SIMCCL_LONG=1. The flag is
// registered by this package, so a test binary that imports it must not define its own -long.
func Long() bool { return *long }

// Call is one collective call, made alike by every rank. Count is in elements as NCCL's API takes
// it: AllReduce, Reduce and Broadcast the buffer, AllGather the per-rank send count,
// ReduceScatter the per-rank receive count, AllToAll the count per peer, SendRecv the count each
// rank sends to rank+1 and receives from rank−1 (mod n, one group of a Send and a Recv).
type Call struct {
	Func     coll.Func
	Count    int
	DataType coll.DataType
	Op       coll.RedOp // the reductions; Sum for the others
	// Scalar is PreMulSum's scalar, as given to ncclRedOpCreatePreMulSum (the executor converts it
	// to the element type).
	Scalar  float64
	Root    int // Reduce, Broadcast
	InPlace bool
}

func (c Call) String() string {
	s := fmt.Sprintf("%s/%v", strings.ToLower(c.Func.String()), c.DataType)
	if reduces(c.Func) {
		s += "/" + c.Op.String()
	}
	s += fmt.Sprintf("/count=%d", c.Count)
	if c.Func == coll.Reduce || c.Func == coll.Broadcast {
		s += fmt.Sprintf("/root=%d", c.Root)
	}
	if c.InPlace {
		s += "/inplace"
	}
	return s
}

// Sizes gives each rank's send and receive buffer sizes, in elements, for n ranks.
func (c Call) Sizes(n int) (send, recv int) {
	switch c.Func {
	case coll.AllGather:
		return c.Count, c.Count * n
	case coll.ReduceScatter:
		return c.Count * n, c.Count
	case coll.AllToAll:
		return c.Count * n, c.Count * n
	}
	return c.Count, c.Count
}

func reduces(f coll.Func) bool {
	return f == coll.AllReduce || f == coll.Reduce || f == coll.ReduceScatter
}

// Buffers are one rank's memory for one call. Send holds the rank's input; Recv is poisoned
// before the call and must hold the rank's result after it. In place, Send and Recv are windows
// of one buffer, Whole, at SendOffset and RecvOffset bytes, in NCCL's layout: AllGather's send
// buffer is block rank of the receive buffer, ReduceScatter's receive buffer block rank of the
// send buffer, the others share the buffer's start. Out of place Whole is nil.
type Buffers struct {
	Send, Recv             []byte
	Whole                  []byte
	SendOffset, RecvOffset int
}

// A World is a communicator of some number of ranks.
type World interface {
	// Run makes call on every rank, bufs[r] being rank r's buffers (len(bufs) is the world's
	// size), and returns when every rank's result is in its Recv.
	Run(call Call, bufs []Buffers) error
	// Close releases the world.
	Close() error
}

// An Executor opens worlds.
type Executor interface {
	Open(nranks int) (World, error)
}

// ExecutorFunc is an Executor made of a function.
type ExecutorFunc func(nranks int) (World, error)

// Open calls f.
func (f ExecutorFunc) Open(nranks int) (World, error) { return f(nranks) }

// EachRank runs f for every rank of n, each in its own goroutine, and joins their errors.
func EachRank(n int, f func(rank int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Case is one conformance case: a call on NRanks ranks with the inputs Seed makes.
type Case struct {
	Call
	NRanks int
	Seed   int64
	// Values makes inputs that float64 carries exactly (Options.Values).
	Values bool
}

func (c Case) String() string { return fmt.Sprintf("%v/n=%d", c.Call, c.NRanks) }

// Plan is the call as coll describes it (Func, NRanks, Count, DataType, Op, Root; SendRecv to
// the next rank), without an algorithm.
func (c Case) Plan() coll.Plan {
	return coll.Plan{Func: c.Func, NRanks: c.NRanks, Count: int64(c.Count), DataType: c.DataType, Op: c.Op, Root: c.Root, Peer: 1}
}

// prodValues are the float inputs of products: ±1, ±2, ±1/2, whose products over up to 8 ranks
// are exact in every float type (2^±8 fits even E4M3).
var prodValues = []float64{1, 2, 0.5, -1, -2, 1, -0.5}

// Input is rank's send data, a function of the seed and the rank alone (the package doc says
// which values).
func (c Case) Input(rank int) []byte {
	dt := c.DataType
	count, _ := c.Sizes(c.NRanks)
	b := make([]byte, count*dt.Size())
	rng := rand.New(rand.NewSource(c.Seed*1000 + int64(rank)))
	switch {
	case !reduces(c.Func) && !c.Values:
		rng.Read(b) // any bit pattern: copies must be exact
	case !dt.IsFloat() && !c.Values:
		for i := range count {
			dt.SetBits(b, i, rng.Uint64())
		}
	case !dt.IsFloat():
		lo := 0
		if dt.IsSigned() {
			lo = -4
		}
		for i := range count {
			dt.SetValue(b, i, float64(lo+rng.Intn(5-lo)))
		}
	default:
		for i := range count {
			var v float64
			switch {
			case c.Op == coll.Prod && reduces(c.Func):
				v = prodValues[rng.Intn(len(prodValues))]
			case dt == coll.Float8e5m2:
				v = float64(rng.Intn(3) - 1) // sums over ≤ 8 ranks within ±8: exact with 3 bits
			case dt == coll.Float8e4m3:
				v = float64(rng.Intn(5) - 2) // within ±16: exact with 4 bits
			default:
				v = float64(rng.Intn(9)-4) + float64(rng.Intn(4))/4
			}
			dt.SetValue(b, i, v)
		}
	}
	return b
}

// poison fills what a collective must overwrite (or leave alone).
const poison = 0xA5

// Buffers makes rank's buffers: its input in Send, Recv poisoned.
func (c Case) Buffers(rank int) Buffers { return c.buffers(rank, c.Input(rank)) }

func (c Case) buffers(rank int, in []byte) Buffers {
	elt := c.DataType.Size()
	send, recv := c.Sizes(c.NRanks)
	poisoned := func(n int) []byte {
		b := make([]byte, n*elt)
		for i := range b {
			b[i] = poison
		}
		return b
	}
	if !c.InPlace {
		return Buffers{Send: append([]byte(nil), in...), Recv: poisoned(recv)}
	}
	b := Buffers{Whole: poisoned(max(send, recv))}
	switch c.Func {
	case coll.AllGather:
		b.SendOffset = rank * c.Count * elt
	case coll.ReduceScatter:
		b.RecvOffset = rank * c.Count * elt
	}
	copy(b.Whole[b.SendOffset:], in)
	b.Send = b.Whole[b.SendOffset : b.SendOffset+send*elt]
	b.Recv = b.Whole[b.RecvOffset : b.RecvOffset+recv*elt]
	return b
}

// reference is the definition of the case's results, from every rank's input.
func (c Case) reference(ins [][]byte) (*coll.Reference, error) {
	p := c.Plan()
	return coll.NewReference(&p, c.Scalar, ins)
}

// Check compares rank's buffers after the call with the definition, element by element (a rank
// of a multi-process run checks itself this way: the other ranks' inputs are made again from the
// seed). It returns the number of wrong elements and descriptions of the first few.
func (c Case) Check(rank int, b Buffers) (wrong int, msgs []string) {
	ins := make([][]byte, c.NRanks)
	for r := range ins {
		ins[r] = c.Input(r)
	}
	ref, err := c.reference(ins)
	if err != nil {
		return 1, []string{fmt.Sprintf("%v: %v", c, err)}
	}
	return c.check(ref, rank, b, c.buffers(rank, ins[rank]).Recv)
}

// maxMsgs is how many wrong elements of one rank are described.
const maxMsgs = 3

// check compares b.Recv with the reference; orig is Recv before the call (what must remain where
// the collective writes nothing).
func (c Case) check(ref *coll.Reference, rank int, b Buffers, orig []byte) (wrong int, msgs []string) {
	dt := c.DataType
	if int64(len(b.Recv)) != ref.RecvCount()*int64(dt.Size()) {
		return 1, []string{fmt.Sprintf("%v: rank %d: receive buffer of %d bytes, want %d", c, rank, len(b.Recv), ref.RecvCount()*int64(dt.Size()))}
	}
	for i := range int(ref.RecvCount()) {
		got := dt.Bits(b.Recv, i)
		e, ok := ref.Want(rank, int64(i))
		if !ok {
			e = coll.Expect{Bits: dt.Bits(orig, i)}
		}
		if e.Holds(dt, got) {
			continue
		}
		if wrong++; wrong <= maxMsgs {
			what := "want"
			if !ok {
				what = "not written by the collective, want"
			}
			msgs = append(msgs, fmt.Sprintf("%v: rank %d: element %d = %s, %s %s", c, rank, i, coll.DescribeBits(dt, got), what, e.Describe(dt)))
		}
	}
	return wrong, msgs
}

// Verify runs c on w and checks every rank's result: the number of wrong elements, descriptions
// of the first few per rank, and the executor's error if the call failed.
func Verify(w World, c Case) (wrong int, msgs []string, err error) {
	n := c.NRanks
	ins := make([][]byte, n)
	bufs := make([]Buffers, n)
	orig := make([][]byte, n)
	for r := range n {
		ins[r] = c.Input(r)
		bufs[r] = c.buffers(r, ins[r])
		orig[r] = append([]byte(nil), bufs[r].Recv...)
	}
	if err := w.Run(c.Call, bufs); err != nil {
		return 0, nil, fmt.Errorf("%v: %w", c, err)
	}
	ref, err := c.reference(ins)
	if err != nil {
		return 0, nil, fmt.Errorf("%v: %w", c, err)
	}
	for r := range n {
		w, m := c.check(ref, r, bufs[r], orig[r])
		wrong += w
		msgs = append(msgs, m...)
	}
	return wrong, msgs, nil
}

// RunCase runs c on w, reports wrong elements with t.Error and fails t at once if the executor
// returns an error; it returns the number of wrong elements.
func RunCase(t testing.TB, w World, c Case) int {
	t.Helper()
	wrong, msgs, err := Verify(w, c)
	require.NoError(t, err)
	for _, m := range msgs {
		t.Error(m)
	}
	return wrong
}

// Matrix is a set of cases: every function × type × reduction (Sum only for the functions that
// do not reduce) × placement × count, on each rank count. A nil Funcs, Types or Ops means all.
// In-place AllToAll is left out (NCCL's AllToAll is not in-place safe); in-place SendRecv is in
// (see SkipInPlaceP2P).
type Matrix struct {
	Name   string // prefixes the subtests' names
	Ranks  []int
	Counts []int
	Funcs  []coll.Func
	Types  []coll.DataType
	Ops    []coll.RedOp
	// TypeOps, if set, gives each type its own reductions (the types are Types, or TypeOps' keys
	// in type order when Types is nil); a type it does not list takes Ops.
	TypeOps map[coll.DataType][]coll.RedOp
}

// All the functions, types and reductions, in the order the matrix walks them.
var (
	AllFuncs = []coll.Func{coll.AllReduce, coll.Reduce, coll.ReduceScatter, coll.Broadcast, coll.AllGather, coll.AllToAll, coll.SendRecv}
	AllTypes = []coll.DataType{coll.Int8, coll.Uint8, coll.Int32, coll.Uint32, coll.Int64, coll.Uint64,
		coll.Float16, coll.Float32, coll.Float64, coll.Bfloat16, coll.Float8e4m3, coll.Float8e5m2}
	AllOps = []coll.RedOp{coll.Sum, coll.Prod, coll.Max, coll.Min, coll.Avg, coll.PreMulSum}
)

// The scalars of PreMulSum cases.
const (
	FloatScalar = 0.75
	IntScalar   = 3
)

// Cases lists the matrix's cases on nranks ranks, in one fixed order (every process of a
// multi-process run walks the same sequence), with seeds 2, 3, … and roots seed mod nranks.
func (m Matrix) Cases(nranks int) []Case {
	funcs, types, ops := m.Funcs, m.Types, m.Ops
	if funcs == nil {
		funcs = AllFuncs
	}
	if types == nil && m.TypeOps != nil {
		for _, dt := range AllTypes {
			if _, ok := m.TypeOps[dt]; ok {
				types = append(types, dt)
			}
		}
	}
	if types == nil {
		types = AllTypes
	}
	if ops == nil {
		ops = AllOps
	}
	var out []Case
	seed := int64(1)
	for _, f := range funcs {
		for _, dt := range types {
			fops := ops
			if o, ok := m.TypeOps[dt]; ok {
				fops = o
			}
			if !reduces(f) {
				fops = []coll.RedOp{coll.Sum}
			}
			for _, op := range fops {
				for _, inPlace := range []bool{false, true} {
					if f == coll.AllToAll && inPlace {
						continue
					}
					for _, count := range m.Counts {
						seed++
						scalar := 0.0
						if op == coll.PreMulSum {
							scalar = FloatScalar
							if !dt.IsFloat() {
								scalar = IntScalar
							}
						}
						out = append(out, Case{Call: Call{Func: f, Count: count, DataType: dt, Op: op, Scalar: scalar,
							Root: int(seed % int64(nranks)), InPlace: inPlace}, NRanks: nranks, Seed: seed})
					}
				}
			}
		}
	}
	return out
}

// SkipInPlaceP2P is an Options.Skip for executors that leave in-place AllToAll and SendRecv
// undefined, as NCCL does (the matrix has in-place SendRecv: the CPU engine supports it).
func SkipInPlaceP2P(c Case) bool {
	return c.InPlace && (c.Func == coll.SendRecv || c.Func == coll.AllToAll)
}

// Default is the CI matrix: every function, type and reduction, in and out of place, at a single
// element and an odd count spanning many chunks, on 1, 3 and 8 ranks, and at two more counts on 2
// and 5 ranks.
func Default() []Matrix {
	return []Matrix{
		{Ranks: []int{1, 3, 8}, Counts: []int{1, 1237}},
		{Ranks: []int{2, 5}, Counts: []int{7, 3001}},
	}
}

// Exhaustive is the long matrix: every rank count from 1 to 8, five counts from 1 to 70001.
func Exhaustive() []Matrix {
	return []Matrix{{Ranks: []int{1, 2, 3, 4, 5, 6, 7, 8}, Counts: []int{1, 7, 131, 1237, 70001}}}
}

// Options adapt a run to an executor.
type Options struct {
	// Matrix is what a default run covers; nil means Default().
	Matrix []Matrix
	// Long replaces Matrix under -long or SIMCCL_LONG=1; nil means Exhaustive().
	Long []Matrix
	// MaxRanks drops the rank counts above it (0: none): an executor with fewer devices.
	MaxRanks int
	// Values makes inputs that float64 carries exactly, for an executor that computes on float64
	// values (coll.Execute): small integers, and no arbitrary bit patterns in the copies.
	Values bool
	// Skip leaves out the cases it returns true for (what an executor does not support).
	Skip func(Case) bool
}

// Run runs the matrix on ex: one subtest per matrix and rank count, each on one World, each
// logging its number of cases and wrong elements; a world stops at its first failing case.
func Run(t *testing.T, ex Executor, opts Options) {
	t.Helper()
	ms := opts.Matrix
	if ms == nil {
		ms = Default()
	}
	if Long() {
		if ms = opts.Long; ms == nil {
			ms = Exhaustive()
		}
	}
	total, totalWrong := 0, 0
	for _, m := range ms {
		for _, n := range m.Ranks {
			if opts.MaxRanks > 0 && n > opts.MaxRanks {
				continue
			}
			name := fmt.Sprintf("n=%d/counts=%s", n, strings.Trim(fmt.Sprint(m.Counts), "[]"))
			if m.Name != "" {
				name = m.Name + "/" + name
			}
			t.Run(name, func(t *testing.T) {
				w, err := ex.Open(n)
				require.NoError(t, err)
				defer func() { require.NoError(t, w.Close()) }()
				cases, wrong := 0, 0
				for _, c := range m.Cases(n) {
					c.Values = opts.Values
					if opts.Skip != nil && opts.Skip(c) {
						continue
					}
					wrong += RunCase(t, w, c)
					cases++
					if t.Failed() {
						break
					}
				}
				total += cases
				totalWrong += wrong
				t.Logf("%d cases, %d wrong elements", cases, wrong)
			})
		}
	}
	t.Logf("conformance: %d cases, %d wrong elements", total, totalWrong)
}
