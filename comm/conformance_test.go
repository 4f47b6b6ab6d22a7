package comm_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strings"
	"testing"

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
		return float64(comm.HalfToFloat32(binary.NativeEndian.Uint16(b[2*i:])))
	case coll.Bfloat16:
		return float64(comm.Bfloat16ToFloat32(binary.NativeEndian.Uint16(b[2*i:])))
	case coll.Float32:
		return float64(math.Float32frombits(binary.NativeEndian.Uint32(b[4*i:])))
	case coll.Float64:
		return math.Float64frombits(binary.NativeEndian.Uint64(b[8*i:]))
	case coll.Float8e4m3:
		return float64(comm.E4M3ToFloat32(b[i]))
	case coll.Float8e5m2:
		return float64(comm.E5M2ToFloat32(b[i]))
	}
	panic("decode of an integer type")
}

func encode(t coll.DataType, b []byte, i int, v float64) {
	switch t {
	case coll.Float16:
		binary.NativeEndian.PutUint16(b[2*i:], comm.Float32ToHalf(float32(v)))
	case coll.Bfloat16:
		binary.NativeEndian.PutUint16(b[2*i:], comm.Float32ToBfloat16(float32(v)))
	case coll.Float32:
		binary.NativeEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case coll.Float64:
		binary.NativeEndian.PutUint64(b[8*i:], math.Float64bits(v))
	case coll.Float8e4m3:
		b[i] = comm.Float32ToE4M3(float32(v))
	case coll.Float8e5m2:
		b[i] = comm.Float32ToE5M2(float32(v))
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
	cs     []*comm.Comm
	premul []coll.RedOp
}

func newWorld(t *testing.T, n int, transport string, slot int) *world {
	t.Helper()
	cs, err := comm.InitAll(n, &comm.Config{Transport: transport, SlotBytes: slot, NChannels: 2})
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

// runCase runs one collective on every rank and checks every element; it returns the number of
// wrong elements (and reports the first few).
func runCase(t *testing.T, w *world, k collKind, dt coll.DataType, op coll.RedOp, inPlace bool, count int, seed int64) int {
	t.Helper()
	n := len(w.cs)
	elt := dt.Size()
	name := fmt.Sprintf("%s/%v/%v/inplace=%v/count=%d/n=%d", kindNames[k], dt, op, inPlace, count, n)
	root := int(seed) % n
	// Inputs: per rank, the number of elements each rank contributes.
	inCount := count
	switch k {
	case kReduceScatter, kAllToAll:
		inCount = count * n
	}
	ins := make([][]byte, n)
	for r := range ins {
		if k.reduces() {
			ins[r] = input(dt, op, r, inCount, seed)
		} else {
			ins[r] = make([]byte, inCount*elt)
			rand.New(rand.NewSource(seed*31 + int64(r))).Read(ins[r])
		}
	}
	outCount := count
	switch k {
	case kAllGather, kAllToAll:
		outCount = count * n
	}
	sends := make([][]byte, n)
	recvs := make([][]byte, n)
	for r := 0; r < n; r++ {
		if inPlace {
			switch k {
			case kAllGather:
				buf := make([]byte, outCount*elt)
				copy(buf[r*count*elt:], ins[r])
				sends[r], recvs[r] = buf[r*count*elt:(r+1)*count*elt], buf
			case kReduceScatter:
				buf := append([]byte(nil), ins[r]...)
				sends[r], recvs[r] = buf, buf[r*count*elt:(r+1)*count*elt]
			default:
				buf := make([]byte, max(inCount, outCount)*elt)
				copy(buf, ins[r])
				sends[r], recvs[r] = buf, buf
			}
		} else {
			sends[r] = append([]byte(nil), ins[r]...)
			recvs[r] = make([]byte, outCount*elt)
			for i := range recvs[r] {
				recvs[r][i] = 0xA5 // poison
			}
		}
	}
	useOps := make([]coll.RedOp, n)
	for r, c := range w.cs {
		useOp := op
		if op == coll.PreMulSum {
			s := floatScalar
			if !isFloat(dt) {
				s = intScalar
			}
			useOp = c.RedOpCreatePreMulSum(s)
		}
		useOps[r] = useOp
		var err error
		switch k {
		case kAllReduce:
			err = c.AllReduce(sends[r], recvs[r], count, dt, useOp, nil)
		case kReduce:
			err = c.Reduce(sends[r], recvs[r], count, dt, useOp, root, nil)
		case kReduceScatter:
			err = c.ReduceScatter(sends[r], recvs[r], count, dt, useOp, nil)
		case kBroadcast:
			err = c.Broadcast(sends[r], recvs[r], count, dt, root, nil)
		case kAllGather:
			err = c.AllGather(sends[r], recvs[r], count, dt, nil)
		case kAllToAll:
			err = c.AllToAll(sends[r], recvs[r], count, dt, nil)
		case kSendRecv:
			c.GroupStart()
			err = c.Send(sends[r], count, dt, (r+1)%n, nil)
			if err == nil {
				err = c.Recv(recvs[r], count, dt, (r+n-1)%n, nil)
			}
			if e := c.GroupEnd(); err == nil {
				err = e
			}
		}
		if err != nil {
			t.Fatalf("%s: rank %d: %v", name, r, err)
		}
	}
	w.sync(t, name)
	if op == coll.PreMulSum {
		for r, c := range w.cs {
			if err := c.RedOpDestroy(useOps[r]); err != nil {
				t.Fatal(err)
			}
		}
	}
	wrong := 0
	report := func(format string, args ...any) {
		wrong++
		if wrong <= 3 {
			t.Errorf("%s: "+format, append([]any{name}, args...)...)
		}
	}
	for r := 0; r < n; r++ {
		out := recvs[r]
		switch k {
		case kAllReduce, kReduce, kReduceScatter:
			if k == kReduce && r != root {
				continue
			}
			base := 0
			if k == kReduceScatter {
				base = r * count
			}
			for i := 0; i < count; i++ {
				ref, tol, bits := reduceRef(dt, op, ins, base+i, n)
				if !isFloat(dt) {
					if got := intBits(dt, out, i); got != bits {
						report("rank %d element %d = %d, want %d", r, i, int64(got), int64(bits))
					}
					continue
				}
				got := decode(dt, out, i)
				if math.IsNaN(got) || math.Abs(got-ref) > tol {
					report("rank %d element %d = %v, want %v ± %v", r, i, got, ref, tol)
				}
			}
		case kBroadcast:
			if string(out[:count*elt]) != string(ins[root]) {
				report("rank %d: broadcast data differs from root %d's", r, root)
			}
		case kAllGather:
			for p := 0; p < n; p++ {
				if string(out[p*count*elt:(p+1)*count*elt]) != string(ins[p]) {
					report("rank %d: block %d differs", r, p)
				}
			}
		case kAllToAll:
			for p := 0; p < n; p++ {
				if string(out[p*count*elt:(p+1)*count*elt]) != string(ins[p][r*count*elt:(r+1)*count*elt]) {
					report("rank %d: block from %d differs", r, p)
				}
			}
		case kSendRecv:
			if string(out[:count*elt]) != string(ins[(r+n-1)%n]) {
				report("rank %d: data from rank %d differs", r, (r+n-1)%n)
			}
		}
	}
	return wrong
}

// matrix runs every collective × type × op × placement at the given counts.
func matrix(t *testing.T, w *world, counts []int, types []coll.DataType, ops []coll.RedOp) (cases, wrong int) {
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
						wrong += runCase(t, w, k, dt, op, inPlace, count, seed)
						cases++
						if t.Failed() {
							return
						}
					}
				}
			}
		}
	}
	return
}

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
