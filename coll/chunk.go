package coll

// Protocol buffer defaults per connection (NCCL 2.30.7 device.h): LL 8 lines/thread × 512
// threads × 8 steps × 16 B; LL128 120 u64/thread × 640 threads × 8 steps × 8 B; Simple 4 MiB
// (DEFAULT_BUFFSIZE).
var DefaultBuffSize = [NumProtos]int64{
	LL:     8 * 512 * NCCLSteps * 16,
	LL128:  120 * 640 * NCCLSteps * 8,
	Simple: 4 << 20,
}

// protoGrain is the granularity chunk sizes are rounded down to (NCCL 2.30.7 ncclProtoGrainSize).
var protoGrain = [NumProtos]int64{LL: 16, LL128: 1920, Simple: 512}

// MinBuffSize is the smallest buffer size Compile takes for protocol p (Plan.BuffSize): one
// protocol grain for each of the NCCL_STEPS slots (LL 128 B, LL128 15,360 B, Simple 4,096 B).
func MinBuffSize(p Proto) int64 { return NCCLSteps * protoGrain[p] }

// DefaultP2PChunkSize is NCCL_P2P_NET_CHUNKSIZE / NCCL_P2P_PCI_CHUNKSIZE (128 KiB, NCCL 2.30.7
// init.cc p2pChunkSize), used for SendRecv/AllToAll when the plan gives no chunk size.
const DefaultP2PChunkSize = 128 << 10

// RingChunkSteps returns (chunkSteps, sliceSteps) for a function and algorithm with protocol
// Simple (NCCL 2.30.7 enqueue.cc calcCollChunking): Ring AllReduce/AllGather/ReduceScatter use
// NCCL_STEPS/2 and NCCL_STEPS/4; everything else 1 and 1. LL and LL128 always use 1 and 1.
func RingChunkSteps(f Func, a Algo, p Proto) (chunkSteps, sliceSteps int) {
	if p == Simple && a == Ring {
		switch f {
		case AllReduce, AllGather, ReduceScatter:
			return NCCLSteps / 2, NCCLSteps / 4
		}
	}
	return 1, 1
}

// NVLSChunkSize is NCCL_NVLS_CHUNKSIZE's default (128 KiB, NCCL 2.30.7 calcCollChunking).
const NVLSChunkSize = 128 << 10

// DefaultChunkSize is the payload chunk size NCCL uses before any size-dependent adjustment (NCCL
// 2.30.7 calcCollChunking): stepSize×chunkSteps, LL halved (8-byte data per 16-byte line), LL128
// ×15/16 (120 of 128 bytes); NVLS at most NCCL_NVLS_CHUNKSIZE, CollNetChain at most 256 KiB;
// rounded down to the protocol grain.
func DefaultChunkSize(f Func, a Algo, p Proto, buffSize int64) int64 {
	if buffSize <= 0 {
		buffSize = DefaultBuffSize[p]
	}
	cs, _ := RingChunkSteps(f, a, p)
	chunk := buffSize / NCCLSteps * int64(cs)
	switch p {
	case LL:
		chunk /= 2
	case LL128:
		chunk = chunk / 16 * 15
	}
	switch a {
	case NVLS, NVLSTree:
		chunk = min64(chunk, NVLSChunkSize)
	case CollNetChain:
		chunk = min64(chunk, 256<<10)
	}
	chunk = chunk / protoGrain[p] * protoGrain[p]
	if chunk < protoGrain[p] {
		chunk = protoGrain[p]
	}
	return chunk
}

// WireBytes is how many bytes a message of payload bytes occupies on the wire (NCCL 2.30.7 device.h
// line formats): LL sends 8 data bytes per 16-byte line, LL128 120 per 128-byte line, Simple the
// payload itself.
func WireBytes(p Proto, payload int64) int64 {
	switch p {
	case LL:
		return divUp(payload, 8) * 16
	case LL128:
		return divUp(payload, 120) * 128
	}
	return payload
}

func divUp(a, b int64) int64 { return (a + b - 1) / b }

func alignUp(a, b int64) int64 { return divUp(a, b) * b }

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// chunking is how one operation cuts its data (all sizes in elements).
type chunking struct {
	proto         Proto
	elt           int64 // element size in bytes
	chunkElems    int64 // payload elements per chunk
	slicesPerChk  int   // Simple: chunkSteps/sliceSteps
	stepsPerSlice int   // slots a message occupies
	stepElems     int64 // elements per buffer step (stepSize/elt), for Simple's slice size rule
	align         int64 // 16 bytes in elements (NCCL aligns partial chunks to 16 B)
}

// appendSlices appends to out the cuts of one primitive call of nelem elements into the messages NCCL posts (genericOp in
// NCCL 2.30.7's prims_simple.h, paraphrased): Simple splits a chunk into SlicePerChunk slices of
// max(ceil(nelem/(16·SPC))·16, stepSize·StepPerSlice/32) elements and posts every slice even when
// it is empty; LL and LL128 post one message per call.
func (ck *chunking) appendSlices(out []int64, nelem int64) []int64 {
	if nelem < 0 {
		nelem = 0
	}
	if ck.proto != Simple || ck.slicesPerChk <= 1 {
		return append(out, nelem)
	}
	return SimpleSlices(out, nelem, ck.slicesPerChk, ck.stepElems*int64(ck.stepsPerSlice)/32, 16)
}

// SimpleSlices appends to out the slices NCCL's Simple protocol cuts a primitive call of n units
// (elements, or bytes) into: slices of max(ceil(n/(grain·slices))·grain, minSlice) units, the last
// ones short or empty, every one posted (genericOp in NCCL 2.30.7's prims_simple.h, paraphrased;
// grain is 16 elements).
func SimpleSlices(out []int64, n int64, slices int, minSlice, grain int64) []int64 {
	spc := int64(slices)
	size := max64(divUp(n, grain*spc)*grain, minSlice)
	off := int64(0)
	for range spc {
		k := max64(min64(size, n-off), 0)
		out = append(out, k)
		off += k
	}
	return out
}

// channelParts splits count elements over nChannels contiguous parts (NCCL 2.19+ gives each channel
// a contiguous range of the buffer; the exact cell packing of scheduleCollTasksToPlan is
// approximated by equal parts aligned to 16 bytes). Channels past the data get an empty part.
func channelParts(count int64, nChannels int, align int64) (offs, counts []int64) {
	offs = make([]int64, nChannels)
	counts = make([]int64, nChannels)
	per := alignUp(divUp(count, int64(nChannels)), align)
	if per == 0 {
		per = align
	}
	for c := 0; c < nChannels; c++ {
		lo := min64(int64(c)*per, count)
		hi := min64(lo+per, count)
		offs[c], counts[c] = lo, hi-lo
	}
	return offs, counts
}

// StepSizes describes the steps of one channel of a Ring (AllReduce, AllGather, ReduceScatter) or
// Tree (AllReduce) collective as Compile cuts them, for executors that replay it without
// materialising its schedule (simnet's compact executors): the number of loops (ring: of n chunks;
// tree: chunks), and the mean payload and wire bytes of one step's message over them. bytes is the
// buffer as nccl-tests counts it (the whole buffer for AllReduce; n per-rank blocks for AllGather
// and ReduceScatter); chunk is the plan's chunk payload (0: DefaultChunkSize). The first channel
// has the largest part; sizes are computed for it, in bytes with Compile's 16-byte alignment,
// which is exact for every data type.
func StepSizes(f Func, a Algo, p Proto, bytes int64, nRanks, nChannels int, chunk int64) (loops int, payload, wire float64) {
	if nRanks < 1 || nChannels < 1 || bytes <= 0 || p < 0 || p >= NumProtos || (a != Ring && a != Tree) {
		return 0, 0, 0
	}
	if chunk <= 0 {
		chunk = DefaultChunkSize(f, a, p, 0)
	}
	n := int64(nRanks)
	var msgs, sumPay, sumWire float64
	add := func(ne int64, count int64) {
		msgs += float64(count)
		sumPay += float64(ne * count)
		sumWire += float64(WireBytes(p, ne) * count)
	}
	switch {
	case a == Tree && f == AllReduce:
		_, cnts := channelParts(bytes, nChannels, 16)
		cnt := cnts[0]
		for eo := int64(0); eo < cnt; eo += chunk {
			add(min64(chunk, cnt-eo), 1)
			loops++
		}
	case a == Tree:
		return 0, 0, 0
	case f == AllReduce:
		_, cnts := channelParts(bytes, nChannels, 16)
		cnt := cnts[0]
		for eo := int64(0); eo < cnt; eo += n * chunk {
			rem := cnt - eo
			cc := chunk
			if rem < n*chunk {
				cc = alignUp(divUp(rem, n), 16)
			}
			for k := int64(0); k < n; k++ {
				add(max64(0, min64(cc, rem-k*cc)), 1)
			}
			loops++
		}
		// A loop's n chunks travel in 2(n−1) steps; the mean per step is the mean per chunk.
	case f == AllGather || f == ReduceScatter:
		_, cnts := channelParts(bytes/n, nChannels, 16)
		cnt := cnts[0]
		for eo := int64(0); eo < cnt; eo += chunk {
			add(min64(chunk, cnt-eo), 1)
			loops++
		}
	default:
		return 0, 0, 0
	}
	if msgs == 0 {
		return 0, 0, 0
	}
	return loops, sumPay / msgs, sumWire / msgs
}

// ChannelCounts is each of the plan's channels' element count as Compile splits Count over them:
// Parts where the plan gives them, else NCCL's contiguous parts with Compile's 16-byte alignment.
// Executors that fold identical channels together (simnet's NVLS replay) use it to find them.
func (p *Plan) ChannelCounts() []int64 {
	align := max64(16/max64(int64(p.DataType.Size()), 1), 1)
	_, cnts := p.parts(p.Count, align)
	if p.Parts != nil {
		cnts = append([]int64(nil), cnts...)
	}
	return cnts
}
