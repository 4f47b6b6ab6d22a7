package cuda

import (
	"math"

	"github.com/simccl/simccl/coll"
)

// The host reference of the kernels, element by element on bit patterns: the emulated driver
// (emulator.go) executes kernel launches with it, and TestReduceKernels checks the GPU's results
// against it bit for bit.

func getElt(b []byte, i, size int) uint64 {
	var v uint64
	for k := size - 1; k >= 0; k-- {
		v = v<<8 | uint64(b[i*size+k])
	}
	return v
}

func putElt(b []byte, i, size int, v uint64) {
	for k := 0; k < size; k++ {
		b[i*size+k] = byte(v >> (8 * k))
	}
}

// refReduce is the CPU reference of one element, on bit patterns (the rules of kernels.cu's
// header): integers wrap; float and double round once per operation; the narrow floats are
// widened to float32, combined with one float32 operation, and narrowed (round to nearest even,
// fp8 saturating); min/max pick by b < a / a < b; premulsum scales the flagged inputs (rounded to
// the type) and sums.
func refReduce(t coll.DataType, op coll.RedOp, a, b, s uint64, flags uint32) uint64 {
	size := t.Size()
	mask := sizeMask(t)
	if isIntType(t) {
		lt := func(x, y uint64) bool {
			if t.IsSigned() {
				sh := uint(64 - 8*size)
				return int64(x<<sh)>>sh < int64(y<<sh)>>sh
			}
			return x < y
		}
		switch op {
		case coll.Sum:
			return (a + b) & mask
		case coll.Prod:
			return (a * b) & mask
		case coll.Min:
			if lt(b, a) {
				return b
			}
			return a
		case coll.Max:
			if lt(a, b) {
				return b
			}
			return a
		case coll.PreMulSum:
			if flags&ScaleA != 0 {
				a = (a * s) & mask
			}
			if flags&ScaleB != 0 {
				b = (b * s) & mask
			}
			return (a + b) & mask
		}
	}
	switch t {
	case coll.Float64:
		x, y, sc := math.Float64frombits(a), math.Float64frombits(b), math.Float64frombits(s)
		switch op {
		case coll.Sum:
			return math.Float64bits(float64(x + y))
		case coll.Prod:
			return math.Float64bits(float64(x * y))
		case coll.Min:
			if y < x {
				return b
			}
			return a
		case coll.Max:
			if x < y {
				return b
			}
			return a
		case coll.PreMulSum:
			if flags&ScaleA != 0 {
				x = float64(x * sc)
			}
			if flags&ScaleB != 0 {
				y = float64(y * sc)
			}
			return math.Float64bits(float64(x + y))
		}
	}
	// float32 and the narrow formats: one float32 operation, then narrow.
	var widen func(uint64) float32
	var narrow func(float32) uint64
	if f, ok := t.Narrow(); ok {
		widen = func(c uint64) float32 { return float32(f.Decode(uint16(c))) }
		narrow = func(v float32) uint64 { return uint64(f.Encode(float64(v))) }
	} else {
		widen = func(c uint64) float32 { return math.Float32frombits(uint32(c)) }
		narrow = func(v float32) uint64 { return uint64(math.Float32bits(v)) }
	}
	x, y := widen(a), widen(b)
	switch op {
	case coll.Sum:
		return narrow(float32(x + y))
	case coll.Prod:
		return narrow(float32(x * y))
	case coll.Min:
		if y < x {
			return b
		}
		return a
	case coll.Max:
		if x < y {
			return b
		}
		return a
	case coll.PreMulSum:
		sc := widen(s)
		if flags&ScaleA != 0 {
			a = narrow(float32(x * sc))
		}
		if flags&ScaleB != 0 {
			b = narrow(float32(y * sc))
		}
		return narrow(float32(widen(a) + widen(b)))
	}
	panic("refReduce: op " + op.String())
}
