package engine_test

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
)

// The tests run on real GPUs where libcuda.so.1 is present (up to 4 of them), else on the
// emulated driver with 4 devices: the same code, the same checks.

var (
	devs     []*cuda.Device
	emulated bool
	// shared: on a machine with fewer than 4 GPUs the tests open them again, round robin, up to
	// 4 ranks (Config.ShareGPUs), so that the multi-rank tests run on one real GPU; ranks on
	// distinct GPUs come first (devs[:n] for n up to the GPU count).
	shared bool
)

// initAll is engine.InitAll with ShareGPUs set when the tests share GPUs.
func initAll(ds []*cuda.Device, cfg *engine.Config) ([]*engine.Comm, error) {
	if shared {
		c := engine.Config{}
		if cfg != nil {
			c = *cfg
		}
		c.ShareGPUs = true
		cfg = &c
	}
	return engine.InitAll(ds, cfg)
}

func TestMain(m *testing.M) {
	var err error
	emulated, err = cuda.InitOrEmulate(4)
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine tests:", err)
		os.Exit(1)
	}
	n, err := cuda.DeviceCount()
	if err == nil {
		for i := 0; i < min(n, 4); i++ {
			d, err := cuda.Open(i)
			if err != nil {
				fmt.Fprintln(os.Stderr, "engine tests:", err)
				os.Exit(1)
			}
			devs = append(devs, d)
		}
		if real := len(devs); !emulated && real > 0 && real < 4 {
			for i := real; i < 4; i++ {
				d, err := cuda.Open(devs[i%real].Ordinal)
				if err != nil {
					fmt.Fprintln(os.Stderr, "engine tests:", err)
					os.Exit(1)
				}
				devs = append(devs, d)
			}
			shared = true
			fmt.Fprintf(os.Stderr, "engine tests: %d GPU(s), opened again for up to %d ranks (Config.ShareGPUs)\n", real, len(devs))
		}
	}
	code := m.Run()
	if w := cuda.EmulatorUnrecordedWaits(); emulated && w > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "engine tests: %d stream waits on events never recorded (a wait enqueued before its record)\n", w)
		code = 1
	}
	for _, d := range devs {
		_ = d.Close()
	}
	os.Exit(code)
}

func needDevs(t *testing.T, n int) []*cuda.Device {
	t.Helper()
	if len(devs) < n {
		t.Skipf("needs %d GPUs, this machine has %d", n, len(devs))
	}
	if emulated {
		t.Logf("on the emulated driver (no libcuda.so.1 here)")
	}
	return devs[:n]
}

// rankBufs is one rank's device memory for one case.
type rankBufs struct {
	send, recv cuda.DevPtr
	alloc      []cuda.DevPtr
	stream     cuda.Stream
}

func (b *rankBufs) free(d *cuda.Device) {
	_ = d.Do(func(x *cuda.Ctx) error {
		for _, p := range b.alloc {
			_ = x.Free(p)
		}
		return x.DestroyStream(b.stream)
	})
}

func upload(d *cuda.Device, data []byte) (cuda.DevPtr, error) {
	var p cuda.DevPtr
	err := d.Do(func(x *cuda.Ctx) error {
		var err error
		if p, err = x.Alloc(max(len(data), 1)); err != nil {
			return err
		}
		return x.CopyHtoD(p, data)
	})
	return p, err
}

func download(d *cuda.Device, p cuda.DevPtr, n int, s cuda.Stream) ([]byte, error) {
	out := make([]byte, n)
	err := d.Do(func(x *cuda.Ctx) error {
		if err := x.StreamSync(s); err != nil {
			return err
		}
		return x.CopyDtoH(out, p)
	})
	return out, err
}

func newStream(d *cuda.Device) (cuda.Stream, error) {
	var s cuda.Stream
	err := d.Do(func(x *cuda.Ctx) error {
		var err error
		s, err = x.NewStream()
		return err
	})
	return s, err
}

// Element values and their encoding --------------------------------------------------------------

func isFloat(t coll.DataType) bool {
	switch t {
	case coll.Float16, coll.Float32, coll.Float64, coll.Bfloat16, coll.Float8e4m3, coll.Float8e5m2:
		return true
	}
	return false
}

func isUnsigned(t coll.DataType) bool {
	return t == coll.Uint8 || t == coll.Uint32 || t == coll.Uint64
}

func put(t coll.DataType, b []byte, i int, v float64) {
	sz := t.Size()
	var bits uint64
	switch {
	case t == coll.Float32:
		bits = uint64(math.Float32bits(float32(v)))
	case t == coll.Float64:
		bits = math.Float64bits(v)
	case isFloat(t):
		f, _ := t.Narrow()
		bits = uint64(f.Encode(v))
	default:
		bits = uint64(int64(v))
	}
	for k := 0; k < sz; k++ {
		b[i*sz+k] = byte(bits >> (8 * k))
	}
}

func get(t coll.DataType, b []byte, i int) float64 {
	sz := t.Size()
	var bits uint64
	for k := sz - 1; k >= 0; k-- {
		bits = bits<<8 | uint64(b[i*sz+k])
	}
	switch {
	case t == coll.Float32:
		return float64(math.Float32frombits(uint32(bits)))
	case t == coll.Float64:
		return math.Float64frombits(bits)
	case isFloat(t):
		f, _ := t.Narrow()
		return f.Decode(uint16(bits))
	case isUnsigned(t):
		return float64(bits)
	}
	sh := uint(64 - 8*sz)
	return float64(int64(bits<<sh) >> sh)
}

// value is rank r's element i: small integers, so that every sum, product and scaled sum of up
// to 4 ranks is exact in every type (fp8 included) and any reduction order gives the same bits.
func value(t coll.DataType, op coll.RedOp, r, i int) float64 {
	if op == coll.Prod {
		if isUnsigned(t) {
			return []float64{1, 2, 1, 1, 2}[(r+i)%5]
		}
		return []float64{1, -1, 2, 1, -2}[(r*3+i)%5]
	}
	v := float64((r*7+i*3)%5) - 2
	if isUnsigned(t) {
		v += 2
	}
	return v
}

const premulScalar = 2

// fold is the reduction of the ranks' values of one element, and whether it is exact.
func fold(t coll.DataType, op coll.RedOp, vals []float64) (float64, bool) {
	acc := vals[0]
	if op == coll.PreMulSum {
		acc *= premulScalar
	}
	for _, v := range vals[1:] {
		switch op {
		case coll.Sum, coll.Avg:
			acc += v
		case coll.PreMulSum:
			acc += premulScalar * v
		case coll.Prod:
			acc *= v
		case coll.Max:
			acc = math.Max(acc, v)
		case coll.Min:
			acc = math.Min(acc, v)
		}
	}
	if op == coll.Avg {
		if isFloat(t) {
			return acc / float64(len(vals)), len(vals)&(len(vals)-1) == 0 // 1/n exact for powers of 2
		}
		return math.Trunc(acc / float64(len(vals))), true
	}
	return acc, true
}

func tolerance(t coll.DataType) float64 {
	switch t {
	case coll.Float16:
		return 1e-2
	case coll.Bfloat16:
		return 5e-2
	case coll.Float8e4m3:
		return 0.25
	case coll.Float8e5m2:
		return 0.5
	}
	return 1e-5
}

// The conformance matrix ------------------------------------------------------------------------

type kind int

const (
	kAllReduce kind = iota
	kReduce
	kReduceScatter
	kBroadcast
	kAllGather
	kAllToAll
	kSendRecv
)

var kindNames = []string{"allreduce", "reduce", "reducescatter", "broadcast", "allgather", "alltoall", "sendrecv"}

func (k kind) reduces() bool { return k <= kReduceScatter }

type tcase struct {
	k       kind
	dt      coll.DataType
	op      coll.RedOp
	count   int
	inPlace bool
	root    int
}

func (c tcase) String() string {
	s := fmt.Sprintf("%s/%v/n%d", kindNames[c.k], c.dt, c.count)
	if c.k.reduces() {
		s += "/" + c.op.String()
	}
	if c.inPlace {
		s += "/inplace"
	}
	if c.k == kReduce || c.k == kBroadcast {
		s += fmt.Sprintf("/root%d", c.root)
	}
	return s
}

// sizes of each rank's send and receive buffers, in elements.
func (c tcase) sizes(n int) (send, recv int) {
	switch c.k {
	case kAllGather:
		return c.count, c.count * n
	case kReduceScatter:
		return c.count * n, c.count
	case kAllToAll:
		return c.count * n, c.count * n
	}
	return c.count, c.count
}

// expected is rank r's receive buffer (nil entries: not written, the poison must remain).
func (c tcase) expected(n, r int) (want []float64, exact []bool) {
	_, rl := c.sizes(n)
	want = make([]float64, rl)
	exact = make([]bool, rl)
	sendVal := func(rank, i int) float64 { return value(c.dt, c.op, rank, i) }
	for i := range want {
		exact[i] = true
		switch c.k {
		case kAllReduce, kReduce, kReduceScatter:
			gi := i
			if c.k == kReduceScatter {
				gi = r*c.count + i
			}
			vals := make([]float64, n)
			for q := range vals {
				vals[q] = sendVal(q, gi)
			}
			want[i], exact[i] = fold(c.dt, c.op, vals)
			if c.k == kReduce && r != c.root {
				want[i] = math.NaN() // untouched: the poison, or in place the rank's input
				if c.inPlace {
					want[i], exact[i] = sendVal(r, i), true
				}
			}
		case kBroadcast:
			want[i] = sendVal(c.root, i)
		case kAllGather:
			want[i] = sendVal(i/c.count, i%c.count)
		case kAllToAll:
			q, j := i/c.count, i%c.count // block q comes from rank q, its block r
			want[i] = sendVal(q, r*c.count+j)
		case kSendRecv:
			want[i] = sendVal((r-1+n)%n, i)
		}
	}
	return want, exact
}

const poison = 0x5a

func runCase(t *testing.T, comms []*engine.Comm, c tcase, premul []coll.RedOp) error {
	n := len(comms)
	elt := c.dt.Size()
	sl, rl := c.sizes(n)
	bufs := make([]*rankBufs, n)
	defer func() {
		for r, b := range bufs {
			if b != nil {
				b.free(comms[r].Device())
			}
		}
	}()
	for r, cm := range comms {
		d := cm.Device()
		b := &rankBufs{}
		bufs[r] = b
		var err error
		if b.stream, err = newStream(d); err != nil {
			return err
		}
		send := make([]byte, sl*elt)
		for i := 0; i < sl; i++ {
			put(c.dt, send, i, value(c.dt, c.op, r, i))
		}
		recv := make([]byte, rl*elt)
		for i := range recv {
			recv[i] = poison
		}
		if c.inPlace {
			// One buffer of max(send, recv) elements holding both, nccl-tests' layout.
			whole := recv
			soff, roff := 0, 0
			switch c.k {
			case kAllGather:
				soff = r * c.count * elt
			case kReduceScatter:
				whole = send
				roff = r * c.count * elt
			}
			if c.k != kReduceScatter {
				copy(whole[soff:], send)
			}
			p, err := upload(d, whole)
			if err != nil {
				return err
			}
			b.alloc = append(b.alloc, p)
			b.send, b.recv = p.Add(soff), p.Add(roff)
		} else {
			if b.send, err = upload(d, send); err != nil {
				return err
			}
			if b.recv, err = upload(d, recv); err != nil {
				return err
			}
			b.alloc = append(b.alloc, b.send, b.recv)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, cm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := bufs[r]
			op := c.op
			if op == coll.PreMulSum {
				op = premul[r]
			}
			switch c.k {
			case kAllReduce:
				errs[r] = cm.AllReduce(b.send, b.recv, c.count, c.dt, op, b.stream)
			case kReduce:
				errs[r] = cm.Reduce(b.send, b.recv, c.count, c.dt, op, c.root, b.stream)
			case kReduceScatter:
				errs[r] = cm.ReduceScatter(b.send, b.recv, c.count, c.dt, op, b.stream)
			case kBroadcast:
				errs[r] = cm.Broadcast(b.send, b.recv, c.count, c.dt, c.root, b.stream)
			case kAllGather:
				errs[r] = cm.AllGather(b.send, b.recv, c.count, c.dt, b.stream)
			case kAllToAll:
				errs[r] = cm.AllToAll(b.send, b.recv, c.count, c.dt, b.stream)
			case kSendRecv:
				cm.GroupStart()
				e1 := cm.Send(b.send, c.count, c.dt, (r+1)%n, b.stream)
				e2 := cm.Recv(b.recv, c.count, c.dt, (r-1+n)%n, b.stream)
				errs[r] = errors.Join(e1, e2, cm.GroupEnd())
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	wrong := 0
	var first string
	for r, cm := range comms {
		got, err := download(cm.Device(), bufs[r].recv, rl*elt, bufs[r].stream)
		if err != nil {
			return err
		}
		want, exact := c.expected(n, r)
		for i := 0; i < rl; i++ {
			ok := true
			if math.IsNaN(want[i]) {
				for k := 0; k < elt; k++ {
					ok = ok && got[i*elt+k] == poison
				}
			} else if g := get(c.dt, got, i); exact[i] {
				ok = g == want[i]
			} else {
				ok = math.Abs(g-want[i]) <= tolerance(c.dt)*math.Max(1, math.Abs(want[i]))
			}
			if !ok {
				if wrong == 0 {
					first = fmt.Sprintf("rank %d element %d: got %v, want %v", r, i, get(c.dt, got, i), want[i])
				}
				wrong++
			}
		}
	}
	if wrong > 0 {
		return fmt.Errorf("%d wrong elements; first: %s", wrong, first)
	}
	return nil
}

type matrix struct {
	kinds  []kind
	types  map[coll.DataType][]coll.RedOp
	counts []int
}

func (m matrix) cases(n int) []tcase {
	var out []tcase
	for _, k := range m.kinds {
		for dt, ops := range m.types {
			if !k.reduces() {
				ops = []coll.RedOp{coll.Sum}
			}
			for _, op := range ops {
				for _, cnt := range m.counts {
					for _, ip := range []bool{false, true} {
						if ip && (k == kAllToAll || k == kSendRecv) {
							continue // not in-place safe (NCCL's neither)
						}
						root := 0
						if k == kReduce || k == kBroadcast {
							root = (cnt + 1) % n
						}
						out = append(out, tcase{k: k, dt: dt, op: op, count: cnt, inPlace: ip, root: root})
					}
				}
			}
		}
	}
	return out
}

func conformance(t *testing.T, algo string, m matrix) {
	total, failed := 0, 0
	// Up to 4 ranks on real GPUs and with -long; the default emulated run (CI) stops at 3, the
	// smallest odd ring, to keep the package's time down.
	most := 4
	if emulated && !*long {
		most = 3
	}
	for n := 1; n <= min(most, len(devs)); n++ {
		comms, err := initAll(needDevs(t, n), &engine.Config{Algo: algo, SlotBytes: 512, NChannels: 2, ChannelBytes: 1024, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		premul := make([]coll.RedOp, n)
		for r, c := range comms {
			premul[r] = c.RedOpCreatePreMulSum(premulScalar)
		}
		for _, c := range m.cases(n) {
			total++
			if err := runCase(t, comms, c, premul); err != nil {
				failed++
				t.Errorf("%d ranks %s %v: %v", n, algo, c, err)
			}
		}
		for _, c := range comms {
			if err := c.Destroy(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Logf("%s: %d cases, %d failed (emulated: %v)", algo, total, failed, emulated)
}

var allOps = []coll.RedOp{coll.Sum, coll.Prod, coll.Max, coll.Min, coll.Avg, coll.PreMulSum}

// long runs the exhaustive matrix (every data type with every op, more counts); the default run
// keeps CI short.
var long = flag.Bool("long", os.Getenv("SIMCCL_LONG") == "1", "run the exhaustive conformance matrix")

func TestConformanceRing(t *testing.T) {
	m := matrix{
		kinds: []kind{kAllReduce, kReduce, kReduceScatter, kBroadcast, kAllGather, kAllToAll, kSendRecv},
		types: map[coll.DataType][]coll.RedOp{
			coll.Float32:    allOps,
			coll.Int32:      allOps,
			coll.Float16:    {coll.Sum, coll.Avg},
			coll.Bfloat16:   {coll.Min},
			coll.Float8e5m2: {coll.Sum},
			coll.Uint8:      {coll.Prod},
		},
		counts: []int{1, 1031},
	}
	if *long || !emulated {
		m.counts = []int{1, 13, 1031, 4099}
		for dt := coll.DataType(0); dt < coll.NumDataTypes; dt++ {
			m.types[dt] = allOps
		}
	}
	conformance(t, "ring", m)
}

func TestConformanceTreeAndPAT(t *testing.T) {
	m := matrix{
		types:  map[coll.DataType][]coll.RedOp{coll.Float32: allOps, coll.Float16: {coll.Sum}, coll.Uint8: {coll.Max}},
		counts: []int{1, 13, 301},
	}
	m.kinds = []kind{kAllReduce}
	conformance(t, "tree", m)
	m.kinds = []kind{kAllGather, kReduceScatter}
	conformance(t, "pat", m)
}

// TestBackToBack chains launches without synchronizing between them: a → b, b → a, … so that a
// launch's staging slots and buffers are reused while peers may still be finishing the previous
// one; only the engine's stream ordering keeps the values right.
func TestBackToBack(t *testing.T) {
	const iters, count = 8, 2053
	if emulated { // wider timing spread between the emulated streams
		defer cuda.SetEmulatorJitter(cuda.SetEmulatorJitter(300 * time.Microsecond))
	}
	for n := 2; n <= min(4, len(devs)); n++ {
		comms, err := initAll(needDevs(t, n), &engine.Config{SlotBytes: 512, NChannels: 2, ChannelBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		a := make([]cuda.DevPtr, n)
		b := make([]cuda.DevPtr, n)
		ss := make([]cuda.Stream, n)
		for r, c := range comms {
			in := make([]byte, 4*count)
			for i := 0; i < count; i++ {
				put(coll.Float32, in, i, float64(i%7+r))
			}
			if a[r], err = upload(c.Device(), in); err != nil {
				t.Fatal(err)
			}
			if b[r], err = upload(c.Device(), in); err != nil {
				t.Fatal(err)
			}
			if ss[r], err = newStream(c.Device()); err != nil {
				t.Fatal(err)
			}
		}
		engine.GroupStart() // one goroutine drives every rank: each launch in a process-wide group
		for it := 0; it < iters; it++ {
			for r, c := range comms {
				src, dst := a[r], b[r]
				if it%2 == 1 {
					src, dst = b[r], a[r]
				}
				if err := c.AllReduce(src, dst, count, coll.Float32, coll.Sum, ss[r]); err != nil {
					t.Fatal(err)
				}
			}
			if err := engine.GroupEnd(); err != nil {
				t.Fatal(err)
			}
			if it+1 < iters {
				engine.GroupStart()
			}
		}
		for r, c := range comms {
			got, err := download(c.Device(), a[r], 4*count, ss[r]) // iters is even: the result is in a
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < count; i++ {
				sum := 0.0
				for q := 0; q < n; q++ {
					sum += float64(i%7 + q)
				}
				want := sum * math.Pow(float64(n), iters-1)
				if g := get(coll.Float32, got, i); g != want {
					t.Fatalf("%d ranks: rank %d element %d: %v, want %v", n, r, i, g, want)
				}
			}
			_ = c.Device().Do(func(x *cuda.Ctx) error { _ = x.Free(a[r]); _ = x.Free(b[r]); return x.DestroyStream(ss[r]) })
			if err := c.Destroy(); err != nil {
				t.Error(err)
			}
		}
	}
}
