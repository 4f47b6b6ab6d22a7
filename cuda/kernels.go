package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/simccl/simccl/coll"
)

// kernelsPTX is kernels/kernels.cu compiled by kernels/gen.sh (nvcc -ptx -arch=sm_90 -O3).
//
//go:embed kernels/kernels.ptx
var kernelsPTX []byte

// PTXEnv names a file whose PTX replaces the embedded module (development: a freshly generated
// module tried before it is committed).
const PTXEnv = "SIMCCL_CUDA_PTX"

// KernelPTX is the PTX the kernels are loaded from: $SIMCCL_CUDA_PTX when set, else the embedded
// module.
func KernelPTX() ([]byte, error) {
	if p := os.Getenv(PTXEnv); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("cuda: %s: %w", PTXEnv, err)
		}
		return b, nil
	}
	return kernelsPTX, nil
}

// kernelTypeNames are the type suffixes of the kernels, indexed by coll.DataType.
var kernelTypeNames = [coll.NumDataTypes]string{"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16", "e4m3", "e5m2"}

// kernelOps are the ops with a reduce kernel (Avg is composed: see Kernels.Reduce).
var kernelOps = [...]coll.RedOp{coll.Sum, coll.Prod, coll.Min, coll.Max, coll.PreMulSum}

func kernelOpName(op coll.RedOp) string {
	switch op {
	case coll.Sum:
		return "sum"
	case coll.Prod:
		return "prod"
	case coll.Min:
		return "min"
	case coll.Max:
		return "max"
	case coll.PreMulSum:
		return "premulsum"
	}
	return ""
}

// ReduceKernelName is the PTX entry of the reduction of t by op.
func ReduceKernelName(t coll.DataType, op coll.RedOp) string {
	return "simccl_reduce_" + kernelOpName(op) + "_" + kernelTypeNames[t]
}

// LLReduceKernelName is the PTX entry of the LL-protocol reduction of t by op.
func LLReduceKernelName(t coll.DataType, op coll.RedOp) string {
	return "simccl_ll_reduce_" + kernelOpName(op) + "_" + kernelTypeNames[t]
}

// LL128ReduceKernelName is the PTX entry of the LL128-protocol reduction of t by op.
func LL128ReduceKernelName(t coll.DataType, op coll.RedOp) string {
	return "simccl_ll128_reduce_" + kernelOpName(op) + "_" + kernelTypeNames[t]
}

// Flags of the premulsum kernels: which inputs are multiplied by the scalar before the sum.
const (
	ScaleA uint32 = 1
	ScaleB uint32 = 2
)

const kernelThreads = 512 // THREADS in kernels.cu (__launch_bounds__)

// llMaxGrid caps the blocks of an LL or LL128 kernel. Its threads spin until the sender's lines
// arrive, holding their SM slots meanwhile: with every (rank, channel, lane) stream of ranks
// sharing a GPU running one such kernel, a few blocks each leave room for the senders (NCCL runs
// one block of at most 512 LL or 640 LL128 threads per channel). A message takes up to 2 blocks
// of one line (LL) or line chunk (LL128) per thread, and more blocks, up to llMaxGrid, once every
// thread has 4 (the kernels' unrolled loop). SIMCCL_LL_MAX_GRID overrides it (a measurement knob).
var llMaxGrid = func() int {
	if v, err := strconv.Atoi(os.Getenv("SIMCCL_LL_MAX_GRID")); err == nil && v >= 1 {
		return v
	}
	return 8
}()

// Kernels is the copy and reduction module loaded into one device's context. Its methods take
// the Ctx of that device (inside Device.Do) and enqueue on a stream; they do not synchronize.
type Kernels struct {
	dev    *Device
	mod    Module
	copy   Function
	reduce [coll.NumDataTypes][coll.NumRedOps]Function
	divide [coll.NumDataTypes]Function
	// LL and LL128 protocols (kernels.cu, "LL", "LL128"): flags travel with the data; indexed
	// by coll.LL and coll.LL128.
	llCopy   [2]Function
	llReduce [2][coll.NumDataTypes][coll.NumRedOps]Function
	maxGrid  int
}

// LoadKernels loads the PTX (KernelPTX) into this context and looks up every kernel. The module
// targets sm_90; the fp8 conversions it uses need compute capability 9.0.
func (c *Ctx) LoadKernels() (*Kernels, error) {
	if c.d.Major < 9 {
		return nil, fmt.Errorf("cuda: device %d is sm_%d%d; the kernels are built for sm_90 (Hopper) or newer", c.d.Ordinal, c.d.Major, c.d.Minor)
	}
	ptx, err := KernelPTX()
	if err != nil {
		return nil, err
	}
	m, err := c.LoadModule(ptx)
	if err != nil {
		return nil, err
	}
	k := &Kernels{dev: c.d, mod: m, maxGrid: 4 * c.d.SMs} // 4 blocks of 512 threads fill an SM (2048 threads)
	if k.maxGrid < 1 {
		k.maxGrid = 1
	}
	fail := func(err error) (*Kernels, error) {
		_ = c.UnloadModule(m)
		return nil, err
	}
	if k.copy, err = c.Function(m, "simccl_copy"); err != nil {
		return fail(err)
	}
	if k.llCopy[coll.LL], err = c.Function(m, "simccl_ll_copy"); err != nil {
		return fail(err)
	}
	if k.llCopy[coll.LL128], err = c.Function(m, "simccl_ll128_copy"); err != nil {
		return fail(err)
	}
	for t := coll.DataType(0); t < coll.NumDataTypes; t++ {
		for _, op := range kernelOps {
			if k.reduce[t][op], err = c.Function(m, ReduceKernelName(t, op)); err != nil {
				return fail(err)
			}
			if k.llReduce[coll.LL][t][op], err = c.Function(m, LLReduceKernelName(t, op)); err != nil {
				return fail(err)
			}
			if k.llReduce[coll.LL128][t][op], err = c.Function(m, LL128ReduceKernelName(t, op)); err != nil {
				return fail(err)
			}
		}
		if isIntType(t) {
			if k.divide[t], err = c.Function(m, "simccl_divide_"+kernelTypeNames[t]); err != nil {
				return fail(err)
			}
		}
	}
	return k, nil
}

// Unload unloads the module.
func (k *Kernels) Unload(c *Ctx) error { return c.UnloadModule(k.mod) }

func isIntType(t coll.DataType) bool { return t >= coll.Int8 && t <= coll.Uint64 }

// grid picks the number of blocks for work items of one thread each: enough to cover them, at
// most 4 blocks per SM (the loops are grid-stride).
func (k *Kernels) grid(items int) uint32 {
	g := (items + kernelThreads - 1) / kernelThreads
	if g > k.maxGrid {
		g = k.maxGrid
	}
	if g < 1 {
		g = 1
	}
	return uint32(g)
}

func (k *Kernels) check(c *Ctx) error {
	if c.d != k.dev {
		return fmt.Errorf("cuda: kernels of device %d used from device %d", k.dev.Ordinal, c.d.Ordinal)
	}
	return nil
}

// Copy copies n bytes from src to dst with the copy kernel (16-byte accesses when both are
// 16-byte aligned). src or dst may be a peer device's memory once peer access is enabled.
func (k *Kernels) Copy(c *Ctx, s Stream, dst, src DevPtr, n int) error {
	if err := k.check(c); err != nil || n == 0 {
		return err
	}
	if n < 0 {
		return fmt.Errorf("cuda: copy of %d bytes", n)
	}
	var a Args
	a.Ptr(dst)
	a.Ptr(src)
	a.U64(uint64(n))
	return c.Launch(k.copy, [3]uint32{k.grid((n + 15) / 16), 1, 1}, [3]uint32{kernelThreads, 1, 1}, 0, s, &a)
}

// Reduce computes dst[i] = op(a[i], b[i]) for count elements of type t (dst may equal a or b).
// PreMulSum multiplies the inputs selected by flags (ScaleA, ScaleB) by scalar, converted to t
// first, and sums. Avg is not a kernel: as NCCL 2.28 runs ncclAvg, floating
// types use PreMulSum with scalar 1/nRanks and integer types Sum followed by Divide.
func (k *Kernels) Reduce(c *Ctx, s Stream, t coll.DataType, op coll.RedOp, dst, a, b DevPtr, count int, scalar float64, flags uint32) error {
	if err := k.check(c); err != nil {
		return err
	}
	if t < 0 || t >= coll.NumDataTypes {
		return fmt.Errorf("cuda: reduce: unknown data type %d", int(t))
	}
	if op < 0 || op >= coll.NumRedOps || k.reduce[t][op] == 0 {
		if op == coll.Avg {
			return errors.New("cuda: reduce: Avg has no kernel (PreMulSum by 1/nRanks for floats, Sum then Divide for integers)")
		}
		return fmt.Errorf("cuda: reduce: unknown op %d", int(op))
	}
	if count < 0 {
		return fmt.Errorf("cuda: reduce of %d elements", count)
	}
	if count == 0 {
		return nil
	}
	vec := 16 / t.Size()
	var args Args
	args.Ptr(dst)
	args.Ptr(a)
	args.Ptr(b)
	args.U64(uint64(count))
	args.U64(ScalarBits(t, scalar))
	args.U32(flags)
	return c.Launch(k.reduce[t][op], [3]uint32{k.grid((count + vec - 1) / vec), 1, 1}, [3]uint32{kernelThreads, 1, 1}, 0, s, &args)
}

// Divide computes dst[i] = src[i] / divisor (truncating) for count elements of integer type t:
// the second half of NCCL's Avg on integers.
func (k *Kernels) Divide(c *Ctx, s Stream, t coll.DataType, dst, src DevPtr, count int, divisor uint64) error {
	if err := k.check(c); err != nil {
		return err
	}
	if t < 0 || t >= coll.NumDataTypes || !isIntType(t) {
		return fmt.Errorf("cuda: divide: %v is not an integer type", t)
	}
	if divisor == 0 {
		return errors.New("cuda: divide by zero")
	}
	if count <= 0 {
		return nil
	}
	var args Args
	_ = args.Add(dst, src, uint64(count), divisor)
	return c.Launch(k.divide[t], [3]uint32{k.grid(count), 1, 1}, [3]uint32{kernelThreads, 1, 1}, 0, s, &args)
}

// ScalarBits encodes a PreMulSum scalar as the bit pattern of element type t (integers truncate
// toward zero, floats round to nearest even, fp8 saturates), as the kernels expect it.
func ScalarBits(t coll.DataType, v float64) uint64 {
	switch t {
	case coll.Int8, coll.Int32, coll.Int64:
		return uint64(int64(v)) & sizeMask(t)
	case coll.Uint8, coll.Uint32, coll.Uint64:
		if v < 0 {
			return uint64(int64(v)) & sizeMask(t)
		}
		return uint64(v) & sizeMask(t)
	case coll.Float16:
		return uint64(coll.FormatHalf.Encode(v))
	case coll.Float32:
		return uint64(math.Float32bits(float32(v)))
	case coll.Float64:
		return math.Float64bits(v)
	case coll.Bfloat16:
		return uint64(coll.FormatBfloat16.Encode(v))
	case coll.Float8e4m3:
		return uint64(coll.FormatE4M3.Encode(v))
	case coll.Float8e5m2:
		return uint64(coll.FormatE5M2.Encode(v))
	}
	return 0
}

func sizeMask(t coll.DataType) uint64 {
	if t.Size() >= 8 {
		return math.MaxUint64
	}
	return 1<<(8*t.Size()) - 1
}

// LL protocol (kernels.cu): a message of n payload bytes travels as LLLines(n) lines of 16 bytes,
// each holding 8 bytes of payload in two 4-byte halves, each beside a copy of the message's
// 4-byte flag; the receiving kernel polls the lines until their flags are the one it expects, so
// no event or fence orders it after the sender. A flag is never 0 (zeroed memory holds no message).

// LLLineBytes is the size of one LL line; it carries LLLinePayload bytes.
const (
	LLLineBytes   = 16
	LLLinePayload = 8
)

// LL128 protocol (kernels.cu, "LL128"): a message of n payload bytes travels as LL128Lines(n)
// lines of 128 bytes, each holding 120 payload bytes and the message's flag in its last 8 bytes;
// the line is written and read as a unit (one warp instruction: NCCL's assumption, which holds
// on NVLink and within a GPU), so the receiver that sees the flag sees the payload. Lines are
// 128-byte aligned.
const (
	LL128LineBytes   = 128
	LL128LinePayload = 120
)

// LLLines is the number of LL lines that carry n payload bytes.
func LLLines(n int64) int64 { return (n + LLLinePayload - 1) / LLLinePayload }

// LLWire is the size in bytes of the LL lines that carry n payload bytes.
func LLWire(n int64) int64 { return LLLines(n) * LLLineBytes }

// LL128Lines is the number of LL128 lines that carry n payload bytes.
func LL128Lines(n int64) int64 { return (n + LL128LinePayload - 1) / LL128LinePayload }

// LL128Wire is the size in bytes of the LL128 lines that carry n payload bytes.
func LL128Wire(n int64) int64 { return LL128Lines(n) * LL128LineBytes }

// LineWire is the size in bytes of the lines of protocol p (LL or LL128) that carry n payload
// bytes.
func LineWire(p coll.Proto, n int64) int64 {
	if p == coll.LL128 {
		return LL128Wire(n)
	}
	return LLWire(n)
}

// lineAlign is the alignment the lines of protocol p need.
func lineAlign(p coll.Proto) DevPtr {
	if p == coll.LL128 {
		return LL128LineBytes
	}
	return LLLineBytes
}

// LLCopy moves n payload bytes: from the LL lines at in (waiting for inFlag, then zeroing the
// lines: a buffer holds no line of a consumed message) or, when in is 0,
// from the raw buffer src; to the raw buffer dst (if not 0) and as LL lines with outFlag to out
// (if not 0). in may be a peer GPU's memory (peer access enabled).
func (k *Kernels) LLCopy(c *Ctx, s Stream, dst, src, in DevPtr, inFlag uint32, out DevPtr, outFlag uint32, n int) error {
	return k.LineCopy(c, s, coll.LL, dst, src, in, inFlag, out, outFlag, n)
}

// LL128Copy is LLCopy with LL128 lines (in and out 128-byte aligned; the receiver zeroes the
// flag word of every line it read).
func (k *Kernels) LL128Copy(c *Ctx, s Stream, dst, src, in DevPtr, inFlag uint32, out DevPtr, outFlag uint32, n int) error {
	return k.LineCopy(c, s, coll.LL128, dst, src, in, inFlag, out, outFlag, n)
}

// LLReduce computes op(a[i], m[i]) for the count elements of type t of the message m, which
// arrives as LL lines at in with inFlag (zeroed once read), and writes it to dst (if not 0) and as LL lines with
// outFlag to out (if not 0). PreMulSum scales as Reduce does (flags ScaleA, ScaleB: a, m).
func (k *Kernels) LLReduce(c *Ctx, s Stream, t coll.DataType, op coll.RedOp, dst, a, in DevPtr, inFlag uint32, out DevPtr, outFlag uint32, count int, scalar float64, flags uint32) error {
	return k.LineReduce(c, s, coll.LL, t, op, dst, a, in, inFlag, out, outFlag, count, scalar, flags)
}

// LL128Reduce is LLReduce with LL128 lines.
func (k *Kernels) LL128Reduce(c *Ctx, s Stream, t coll.DataType, op coll.RedOp, dst, a, in DevPtr, inFlag uint32, out DevPtr, outFlag uint32, count int, scalar float64, flags uint32) error {
	return k.LineReduce(c, s, coll.LL128, t, op, dst, a, in, inFlag, out, outFlag, count, scalar, flags)
}

// lineGrid is the grid of a line kernel of protocol p for n payload bytes (LL: a line per
// thread, LL128: a line per 8 threads; llMaxGrid).
func (k *Kernels) lineGrid(p coll.Proto, n int64) uint32 {
	items := LLLines(n)
	if p == coll.LL128 {
		items = LL128Lines(n) * 8
	}
	g := max(min(int(k.grid(int(items))), 2), min(int(k.grid(int((items+3)/4))), llMaxGrid))
	return uint32(max(g, 1))
}

// LineCopy is LLCopy (p = coll.LL) or LL128Copy (p = coll.LL128).
func (k *Kernels) LineCopy(c *Ctx, s Stream, p coll.Proto, dst, src, in DevPtr, inFlag uint32, out DevPtr, outFlag uint32, n int) error {
	if err := k.check(c); err != nil || n == 0 {
		return err
	}
	if p != coll.LL && p != coll.LL128 {
		return fmt.Errorf("cuda: no line kernels for protocol %v", p)
	}
	switch {
	case n < 0:
		return fmt.Errorf("cuda: %v copy of %d bytes", p, n)
	case (in == 0) == (src == 0):
		return fmt.Errorf("cuda: %v copy needs exactly one of a raw source and %v lines", p, p)
	case in != 0 && inFlag == 0, out != 0 && outFlag == 0:
		return fmt.Errorf("cuda: %v flag 0", p)
	case dst == 0 && out == 0:
		return fmt.Errorf("cuda: %v copy with no destination", p)
	case in%lineAlign(p) != 0 || out%lineAlign(p) != 0:
		return fmt.Errorf("cuda: %v lines must be %d-byte aligned", p, lineAlign(p))
	}
	var a Args
	a.Ptr(dst)
	a.Ptr(src)
	a.Ptr(in)
	a.U32(inFlag)
	a.Ptr(out)
	a.U32(outFlag)
	a.U64(uint64(n))
	return c.Launch(k.llCopy[p], [3]uint32{k.lineGrid(p, int64(n)), 1, 1}, [3]uint32{kernelThreads, 1, 1}, 0, s, &a)
}

// LineReduce is LLReduce (p = coll.LL) or LL128Reduce (p = coll.LL128).
func (k *Kernels) LineReduce(c *Ctx, s Stream, p coll.Proto, t coll.DataType, op coll.RedOp, dst, a, in DevPtr, inFlag uint32, out DevPtr, outFlag uint32, count int, scalar float64, flags uint32) error {
	if err := k.check(c); err != nil {
		return err
	}
	if p != coll.LL && p != coll.LL128 {
		return fmt.Errorf("cuda: no line kernels for protocol %v", p)
	}
	if t < 0 || t >= coll.NumDataTypes {
		return fmt.Errorf("cuda: %v reduce: unknown data type %d", p, int(t))
	}
	if op < 0 || op >= coll.NumRedOps || k.llReduce[p][t][op] == 0 {
		return fmt.Errorf("cuda: %v reduce: no kernel for op %v", p, op)
	}
	switch {
	case count < 0:
		return fmt.Errorf("cuda: %v reduce of %d elements", p, count)
	case count == 0:
		return nil
	case a == 0 || in == 0 || (dst == 0 && out == 0):
		return fmt.Errorf("cuda: %v reduce needs a local input, the lines and a destination", p)
	case inFlag == 0, out != 0 && outFlag == 0:
		return fmt.Errorf("cuda: %v flag 0", p)
	case in%lineAlign(p) != 0 || out%lineAlign(p) != 0:
		return fmt.Errorf("cuda: %v lines must be %d-byte aligned", p, lineAlign(p))
	}
	var args Args
	args.Ptr(dst)
	args.Ptr(a)
	args.Ptr(in)
	args.U32(inFlag)
	args.Ptr(out)
	args.U32(outFlag)
	args.U64(uint64(count))
	args.U64(ScalarBits(t, scalar))
	args.U32(flags)
	return c.Launch(k.llReduce[p][t][op], [3]uint32{k.lineGrid(p, int64(count*t.Size())), 1, 1}, [3]uint32{kernelThreads, 1, 1}, 0, s, &args)
}

// CopyKernel is the copy kernel's CUfunction and the most blocks Copy launches it with, for C
// code that launches it itself (cuda/libnccl's one-rank path): simccl_copy(dst, src, nbytes), 512
// threads a block, ceil(ceil(nbytes/16)/512) blocks capped at maxGrid.
func (k *Kernels) CopyKernel() (f Function, maxGrid int) { return k.copy, k.maxGrid }
