package comm_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

// The collective conformance suite: every collective × data type × reduction × in/out-of-place ×
// odd counts × rank counts, on every transport, checked element by element against a float64 (or
// exact, wrapping integer) reference. The default run keeps CI short; -long (or SIMCCL_LONG=1)
// runs the exhaustive matrix (1–8 ranks, more counts).

var long = flag.Bool("long", os.Getenv("SIMCCL_LONG") == "1", "run the exhaustive conformance matrix")

var allTypes = []coll.DataType{coll.Int8, coll.Uint8, coll.Int32, coll.Uint32, coll.Int64, coll.Uint64,
	coll.Float16, coll.Float32, coll.Float64, coll.Bfloat16, coll.Float8e4m3, coll.Float8e5m2}
var allOps = []coll.RedOp{coll.Sum, coll.Prod, coll.Max, coll.Min, coll.Avg, coll.PreMulSum}

type collKind int

const (
	kAllReduce collKind = iota
	kReduce
	kReduceScatter
	kBroadcast
	kAllGather
	kAllToAll
	kSendRecv
	numKinds
)

var kindNames = []string{"allreduce", "reduce", "reducescatter", "broadcast", "allgather", "alltoall", "sendrecv"}

func (k collKind) reduces() bool { return k <= kReduceScatter }

func isFloat(t coll.DataType) bool {
	switch t {
	case coll.Float16, coll.Float32, coll.Float64, coll.Bfloat16, coll.Float8e4m3, coll.Float8e5m2:
		return true
	}
	return false
}

// decode reads element i of b as float64 (floats) or as the integer's value (ints; uint64 may lose
// precision, so integer checks use decodeBits instead).
func decode(t coll.DataType, b []byte, i int) float64 {
	switch t {
	case coll.Float16:
		return float64(coll.HalfToFloat32(binary.NativeEndian.Uint16(b[2*i:])))
	case coll.Bfloat16:
		return float64(coll.Bfloat16ToFloat32(binary.NativeEndian.Uint16(b[2*i:])))
	case coll.Float32:
		return float64(math.Float32frombits(binary.NativeEndian.Uint32(b[4*i:])))
	case coll.Float64:
		return math.Float64frombits(binary.NativeEndian.Uint64(b[8*i:]))
	case coll.Float8e4m3:
		return float64(coll.E4M3ToFloat32(b[i]))
	case coll.Float8e5m2:
		return float64(coll.E5M2ToFloat32(b[i]))
	}
	panic("decode of an integer type")
}

func encode(t coll.DataType, b []byte, i int, v float64) {
	switch t {
	case coll.Float16:
		binary.NativeEndian.PutUint16(b[2*i:], coll.Float32ToHalf(float32(v)))
	case coll.Bfloat16:
		binary.NativeEndian.PutUint16(b[2*i:], coll.Float32ToBfloat16(float32(v)))
	case coll.Float32:
		binary.NativeEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case coll.Float64:
		binary.NativeEndian.PutUint64(b[8*i:], math.Float64bits(v))
	case coll.Float8e4m3:
		b[i] = coll.Float32ToE4M3(float32(v))
	case coll.Float8e5m2:
		b[i] = coll.Float32ToE5M2(float32(v))
	default:
		panic("encode of an integer type")
	}
}

// intBits reads element i of an integer type as a sign- or zero-extended uint64.
func intBits(t coll.DataType, b []byte, i int) uint64 {
	switch t {
	case coll.Int8:
		return uint64(int64(int8(b[i])))
	case coll.Uint8:
		return uint64(b[i])
	case coll.Int32:
		return uint64(int64(int32(binary.NativeEndian.Uint32(b[4*i:]))))
	case coll.Uint32:
		return uint64(binary.NativeEndian.Uint32(b[4*i:]))
	case coll.Int64, coll.Uint64:
		return binary.NativeEndian.Uint64(b[8*i:])
	}
	panic("intBits of a float type")
}

func putInt(t coll.DataType, b []byte, i int, v uint64) {
	switch t.Size() {
	case 1:
		b[i] = byte(v)
	case 4:
		binary.NativeEndian.PutUint32(b[4*i:], uint32(v))
	case 8:
		binary.NativeEndian.PutUint64(b[8*i:], v)
	}
}

// wrap truncates v to the type's width and extends it back (the type's arithmetic).
func wrap(t coll.DataType, v uint64) uint64 {
	var b [8]byte
	putInt(t, b[:], 0, v)
	return intBits(t, b[:], 0)
}

func signed(t coll.DataType) bool { return t == coll.Int8 || t == coll.Int32 || t == coll.Int64 }

// input fills rank r's buffer of count elements (seed varies per call).
func input(t coll.DataType, op coll.RedOp, r, count int, seed int64) []byte {
	b := make([]byte, count*t.Size())
	rng := rand.New(rand.NewSource(seed*1000 + int64(r)))
	if !isFloat(t) {
		for i := 0; i < count; i++ {
			putInt(t, b, i, rng.Uint64())
		}
		return b
	}
	for i := 0; i < count; i++ {
		var v float64
		if op == coll.Prod {
			v = []float64{1, 2, 0.5, -1, -2, 1, -0.5}[rng.Intn(7)]
		} else {
			// Small values whose partial sums over ≤ 8 ranks are exact in the type, so Sum, Min and Max
			// must match the reference exactly; only Avg/PreMulSum round.
			switch t {
			case coll.Float8e5m2:
				v = float64(rng.Intn(3) - 1) // partial sums within ±8: exact with 2 mantissa bits
			case coll.Float8e4m3:
				v = float64(rng.Intn(5) - 2) // within ±16: exact with 3 mantissa bits
			default:
				v = float64(rng.Intn(9)-4) + float64(rng.Intn(4))/4
			}
		}
		encode(t, b, i, v)
	}
	return b
}

// epsOf is the relative rounding error of one operation in the type.
func epsOf(t coll.DataType) float64 {
	switch t {
	case coll.Float16:
		return math.Ldexp(1, -10)
	case coll.Bfloat16:
		return math.Ldexp(1, -7)
	case coll.Float32:
		return math.Ldexp(1, -23)
	case coll.Float8e4m3:
		return math.Ldexp(1, -3)
	case coll.Float8e5m2:
		return math.Ldexp(1, -2)
	}
	return math.Ldexp(1, -52)
}

// typed rounds a scalar to the element type (NCCL converts PreMulSum's scalar, §8.1).
func typed(t coll.DataType, v float64) float64 {
	b := make([]byte, 8)
	encode(t, b, 0, v)
	return decode(t, b, 0)
}

const floatScalar, intScalar = 0.75, 3

// checker compares one element of a reduction result against the reference built from inputs.
func reduceRef(t coll.DataType, op coll.RedOp, ins [][]byte, i, n int) (ref float64, tol float64, bits uint64) {
	if !isFloat(t) {
		var acc uint64
		for r, in := range ins {
			v := intBits(t, in, i)
			if op == coll.PreMulSum {
				v = wrap(t, v*intScalar)
			}
			switch {
			case r == 0:
				acc = v
			case op == coll.Sum || op == coll.Avg || op == coll.PreMulSum:
				acc = wrap(t, acc+v)
			case op == coll.Prod:
				acc = wrap(t, acc*v)
			case op == coll.Max && (signed(t) && int64(v) > int64(acc) || !signed(t) && v > acc):
				acc = v
			case op == coll.Min && (signed(t) && int64(v) < int64(acc) || !signed(t) && v < acc):
				acc = v
			}
		}
		if op == coll.Avg {
			if signed(t) {
				acc = wrap(t, uint64(int64(acc)/int64(n)))
			} else {
				acc = wrap(t, acc/uint64(n))
			}
		}
		return 0, 0, acc
	}
	scale := 1.0
	switch op {
	case coll.Avg:
		scale = typed(t, 1/float64(n))
	case coll.PreMulSum:
		scale = typed(t, floatScalar)
	}
	var acc, mag float64
	for r, in := range ins {
		v := decode(t, in, i)
		switch op {
		case coll.Sum, coll.Avg, coll.PreMulSum:
			acc += v * scale
			mag += math.Abs(v * scale)
		case coll.Prod:
			if r == 0 {
				acc = v
			} else {
				acc *= v
			}
		case coll.Max:
			if r == 0 || v > acc {
				acc = v
			}
		case coll.Min:
			if r == 0 || v < acc {
				acc = v
			}
		}
	}
	switch op {
	case coll.Avg, coll.PreMulSum:
		// each pre-multiplication and each partial sum rounds once, by at most half a unit
		tol = float64(2*n) * epsOf(t) / 2 * mag
	}
	return acc, tol, 0
}

// world is one communicator of n ranks on one transport, driven from one goroutine.
type world struct {
	cs []*comm.Comm
}

func newWorld(t *testing.T, n int, transport string, slot int) *world {
	t.Helper()
	cs, err := comm.InitAll(n, &comm.Config{Transport: transport, SlotBytes: slot, NChannels: 2, Timeout: confTimeout})
	if err != nil {
		t.Fatalf("InitAll(%d) over %s: %v", n, transport, err)
	}
	w := &world{cs: cs}
	return w
}

func (w *world) close() {
	for _, c := range w.cs {
		c.Destroy()
	}
}

func (w *world) sync(t *testing.T, what string) {
	t.Helper()
	for r, c := range w.cs {
		if err := c.Synchronize(); err != nil {
			t.Fatalf("%s: rank %d: %v", what, r, err)
		}
	}
}

// caseSpec is one conformance case.
type caseSpec struct {
	k       collKind
	dt      coll.DataType
	op      coll.RedOp
	inPlace bool
	count   int
	seed    int64
}

func (sp caseSpec) String() string {
	return fmt.Sprintf("%s/%v/%v/inplace=%v/count=%d", kindNames[sp.k], sp.dt, sp.op, sp.inPlace, sp.count)
}

// runRank runs one case on one rank (every rank of the communicator must run the same case) and
// checks this rank's output element by element; it returns the number of wrong elements and the
// first few complaints.
func runRank(c *comm.Comm, sp caseSpec) (wrong int, msgs []string, err error) {
	n, r := c.Count(), c.Rank()
	k, dt, op, count, seed := sp.k, sp.dt, sp.op, sp.count, sp.seed
	elt := dt.Size()
	root := int(seed) % n
	inCount := count
	switch k {
	case kReduceScatter, kAllToAll:
		inCount = count * n
	}
	// Every rank's input is a function of (rank, seed), so each rank can build the reference.
	ins := make([][]byte, n)
	for p := range ins {
		if k.reduces() {
			ins[p] = input(dt, op, p, inCount, seed)
		} else {
			ins[p] = make([]byte, inCount*elt)
			rand.New(rand.NewSource(seed*31 + int64(p))).Read(ins[p])
		}
	}
	outCount := count
	switch k {
	case kAllGather, kAllToAll:
		outCount = count * n
	}
	var send, recv []byte
	if sp.inPlace {
		switch k {
		case kAllGather:
			buf := make([]byte, outCount*elt)
			copy(buf[r*count*elt:], ins[r])
			send, recv = buf[r*count*elt:(r+1)*count*elt], buf
		case kReduceScatter:
			buf := append([]byte(nil), ins[r]...)
			send, recv = buf, buf[r*count*elt:(r+1)*count*elt]
		default:
			buf := make([]byte, max(inCount, outCount)*elt)
			copy(buf, ins[r])
			send, recv = buf, buf
		}
	} else {
		send = append([]byte(nil), ins[r]...)
		recv = make([]byte, outCount*elt)
		for i := range recv {
			recv[i] = 0xA5 // poison
		}
	}
	useOp := op
	if op == coll.PreMulSum {
		s := floatScalar
		if !isFloat(dt) {
			s = intScalar
		}
		useOp = c.RedOpCreatePreMulSum(s)
		defer c.RedOpDestroy(useOp)
	}
	switch k {
	case kAllReduce:
		err = c.AllReduce(send, recv, count, dt, useOp, nil)
	case kReduce:
		err = c.Reduce(send, recv, count, dt, useOp, root, nil)
	case kReduceScatter:
		err = c.ReduceScatter(send, recv, count, dt, useOp, nil)
	case kBroadcast:
		err = c.Broadcast(send, recv, count, dt, root, nil)
	case kAllGather:
		err = c.AllGather(send, recv, count, dt, nil)
	case kAllToAll:
		err = c.AllToAll(send, recv, count, dt, nil)
	case kSendRecv:
		c.GroupStart()
		err = c.Send(send, count, dt, (r+1)%n, nil)
		if err == nil {
			err = c.Recv(recv, count, dt, (r+n-1)%n, nil)
		}
		if e := c.GroupEnd(); err == nil {
			err = e
		}
	}
	if err == nil {
		err = c.Synchronize()
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%v: rank %d: %w", sp, r, err)
	}
	report := func(format string, args ...any) {
		wrong++
		if wrong <= 3 {
			msgs = append(msgs, fmt.Sprintf("%v/n=%d: rank %d: ", sp, n, r)+fmt.Sprintf(format, args...))
		}
	}
	out := recv
	switch k {
	case kAllReduce, kReduce, kReduceScatter:
		if k == kReduce && r != root {
			break
		}
		base := 0
		if k == kReduceScatter {
			base = r * count
		}
		for i := 0; i < count; i++ {
			ref, tol, bits := reduceRef(dt, op, ins, base+i, n)
			if !isFloat(dt) {
				if got := intBits(dt, out, i); got != bits {
					report("element %d = %d, want %d", i, int64(got), int64(bits))
				}
				continue
			}
			got := decode(dt, out, i)
			if math.IsNaN(got) || math.Abs(got-ref) > tol {
				report("element %d = %v, want %v ± %v", i, got, ref, tol)
			}
		}
	case kBroadcast:
		if string(out[:count*elt]) != string(ins[root]) {
			report("broadcast data differs from root %d's", root)
		}
	case kAllGather:
		for p := 0; p < n; p++ {
			if string(out[p*count*elt:(p+1)*count*elt]) != string(ins[p]) {
				report("block %d differs", p)
			}
		}
	case kAllToAll:
		for p := 0; p < n; p++ {
			if string(out[p*count*elt:(p+1)*count*elt]) != string(ins[p][r*count*elt:(r+1)*count*elt]) {
				report("block from %d differs", p)
			}
		}
	case kSendRecv:
		if string(out[:count*elt]) != string(ins[(r+n-1)%n]) {
			report("data from rank %d differs", (r+n-1)%n)
		}
	}
	return wrong, msgs, nil
}

// runCase runs one case on every rank of the world (a goroutine per rank).
func runCase(t *testing.T, w *world, sp caseSpec) int {
	t.Helper()
	n := len(w.cs)
	wrongs := make([]int, n)
	msgs := make([][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range w.cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wrongs[r], msgs[r], errs[r] = runRank(c, sp)
		}()
	}
	wg.Wait()
	total := 0
	for r := range wrongs {
		if errs[r] != nil {
			t.Fatal(errs[r])
		}
		for _, m := range msgs[r] {
			t.Error(m)
		}
		total += wrongs[r]
	}
	return total
}

// forMatrix calls fn for every collective × type × op × placement × count, in one fixed order
// (every process of a multi-process run walks the same sequence); fn returns false to stop.
func forMatrix(counts []int, types []coll.DataType, ops []coll.RedOp, fn func(caseSpec) bool) {
	seed := int64(1)
	for k := collKind(0); k < numKinds; k++ {
		for _, dt := range types {
			kops := ops
			if !k.reduces() {
				kops = []coll.RedOp{coll.Sum}
			}
			for _, op := range kops {
				for _, inPlace := range []bool{false, true} {
					if k == kAllToAll && inPlace {
						continue
					}
					for _, count := range counts {
						seed++
						if !fn(caseSpec{k, dt, op, inPlace, count, seed}) {
							return
						}
					}
				}
			}
		}
	}
}

// matrix runs every case on a world.
func matrix(t *testing.T, w *world, counts []int, types []coll.DataType, ops []coll.RedOp) (cases, wrong int) {
	forMatrix(counts, types, ops, func(sp caseSpec) bool {
		wrong += runCase(t, w, sp)
		cases++
		return !t.Failed()
	})
	return
}

// confTimeout bounds a wait without progress in the conformance runs. The suite checks results, the
// fault tests check how fast a dead peer is noticed; on a host where other work leaves a rank
// without a core for seconds (seen at load 20 on 2 cores), the default 10 s failed correct runs.
const confTimeout = time.Minute

// testSlot is small so that modest counts already span many chunks, slices and slot wrap-arounds.
const testSlot = 2048

func TestConformance(t *testing.T) {
	type cfg struct {
		transport string
		ranks     []int
		counts    []int
		types     []coll.DataType
		ops       []coll.RedOp
	}
	short := []coll.DataType{coll.Int8, coll.Uint64, coll.Float16, coll.Float32, coll.Bfloat16, coll.Float8e4m3, coll.Float8e5m2}
	cfgs := []cfg{
		{"inproc", []int{1, 3, 8}, []int{1, 1237}, allTypes, allOps},
		{"inproc", []int{2, 5}, []int{7, 3001}, allTypes, allOps},
		{"tcp", []int{3}, []int{1237}, short, allOps},
		{"tcp", []int{2}, []int{5}, allTypes, []coll.RedOp{coll.Sum, coll.Avg}},
		{"shm", []int{4}, []int{1237}, short, allOps},
		{"shm", []int{2}, []int{5}, allTypes, []coll.RedOp{coll.Sum, coll.Avg}},
	}
	if *long {
		cfgs = nil
		for _, tr := range []string{"inproc", "tcp", "shm"} {
			cfgs = append(cfgs, cfg{tr, []int{1, 2, 3, 4, 5, 6, 7, 8}, []int{1, 7, 131, 1237, 70001}, allTypes, allOps})
		}
	}
	total, totalWrong := 0, 0
	for _, c := range cfgs {
		for _, n := range c.ranks {
			t.Run(fmt.Sprintf("%s/n=%d/counts=%s", c.transport, n, strings.Trim(fmt.Sprint(c.counts), "[]")), func(t *testing.T) {
				w := newWorld(t, n, c.transport, testSlot)
				defer w.close()
				cases, wrong := matrix(t, w, c.counts, c.types, c.ops)
				total += cases
				totalWrong += wrong
				t.Logf("%d cases, %d wrong elements", cases, wrong)
			})
		}
	}
	t.Logf("conformance: %d cases, %d wrong elements", total, totalWrong)
}
