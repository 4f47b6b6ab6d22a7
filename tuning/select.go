package tuning

import (
	"fmt"
	"sort"

	"github.com/simccl/simccl/coll"
)

// Time is ncclTopoGetAlgoTime (NCCL 2.28 tuning.cc): the predicted µs of one call of nBytes (the
// tuning size: total output for AllGather, total input for ReduceScatter), or -1 when the cell is
// unusable. numPipeOps > 1 models aggregated calls (ncclPrepareTasks). Arithmetic is float32, as in
// NCCL.
func (t *Table) Time(f coll.Func, a coll.Algo, p coll.Proto, nBytes int64, numPipeOps int) float32 {
	if !t.Enabled(f, a, p) {
		return -1
	}
	bw := t.Bw[f][a][p]
	lat := t.Lat[f][a][p]
	logSize := log2i(nBytes >> 6)
	if a == coll.Tree && f == coll.AllReduce && logSize >= 0 && logSize < 23 {
		bw *= treeCorrectionFactor[p][logSize]
	}
	if a == coll.NVLSTree && f == coll.AllReduce && logSize >= 0 && logSize < 24 && t.Comm.CCMin >= 100 &&
		(t.Comm.CPUArch == "x86" || t.Comm.CPUArch == "") {
		bw *= treeCorrectionFactor[p][logSize]
	}
	if a == coll.Ring && p == coll.Simple && f == coll.AllReduce && t.Comm.NNodes > 1 &&
		nBytes/int64(t.NChannels*t.Comm.NRanks) >= 64 {
		if t.Comm.CCMin < 80 {
			lat *= 1.9
		} else {
			lat *= 1.4
		}
	}
	if numPipeOps < 1 {
		numPipeOps = 1
	}
	latCount := numPipeOps
	if a != coll.Ring {
		latCount = (numPipeOps + maxDevWorkBatchColls - 1) / maxDevWorkBatchColls
	}
	return lat*float32(latCount) + float32(nBytes)/(1000*bw)
}

// CostTable is the per-call table a tuner plugin sees (collCostTable of the NCCL 2.22+ tuner
// plugin API, v3+): µs per [algo][proto], -1 unusable.
type CostTable [coll.NumAlgos][coll.NumProtos]float32

// Call is one collective call as NCCL logs it.
type Call struct {
	Func coll.Func
	// Count is the element count NCCL's API takes (per-rank send count for AllGather, per-rank
	// receive count for ReduceScatter).
	Count int64
	// ElemSize is the datatype size in bytes (4 when 0).
	ElemSize int
	// Op and DataType only bin grouped calls (ncclPrepareTasks) and apply the fp8/PAT rules:
	// DataType uses ncclDataType_t numbering (10, 11 are fp8), Op ncclRedOp_t (4 Avg, ≥5
	// PreMulSum).
	Op, DataType int
}

func (c Call) elemSize() int64 {
	if c.ElemSize <= 0 {
		return 4
	}
	return int64(c.ElemSize)
}

// Bytes is what NCCL's choice line prints: count × element size.
func (c Call) Bytes() int64 { return c.Count * c.elemSize() }

// TuneBytes is the size the cost model uses (NCCL 2.28 ncclFuncMaxSendRecvCount).
func (c Call) TuneBytes(nRanks int) int64 {
	if c.Func == coll.AllGather || c.Func == coll.ReduceScatter {
		return c.Bytes() * int64(nRanks)
	}
	return c.Bytes()
}

func trafficPerByte(f coll.Func, nRanks int) int64 {
	switch f {
	case coll.AllReduce:
		return 2
	case coll.AllGather, coll.ReduceScatter:
		return int64(nRanks)
	}
	return 1
}

// Choice is what NCCL decides for one call.
type Choice struct {
	Func  coll.Func
	Bytes int64 // count × element size (NCCL's log)
	Algo  coll.Algo
	Proto coll.Proto
	// MaxChannels and NThreads: topoGetAlgoInfo's nc and nt (NCCL 2.28 enqueue.cc), after any override.
	MaxChannels int
	NThreads    int
	// ChannelLo..ChannelHi is the range the scheduler spreads the call over (the choice line);
	// NChannels = ChannelHi-ChannelLo+1.
	ChannelLo, ChannelHi, NChannels int
	// TimeUs is the model's predicted time; Cost the whole per-call table.
	TimeUs float32
	Cost   CostTable
	// ChunkSize is calcCollChunking's chunk (bytes) for the first channel's part (NCCL 2.28 enqueue.cc).
	ChunkSize int64
	// Override is the 1-based line of the tuner-file rule that applied, 0 if none.
	Override int
	// PlanIndex is the call's position in the group's kernel plan (the order of NCCL's choice
	// lines): calls are scheduled by kind (CollNet, NVLS), then (function, op, type) bin, then size.
	PlanIndex int
	// OneRank marks a call of a one-rank communicator, for which NCCL makes no choice (it copies
	// the buffer: coll.OneRankAlgo) and prints no line; the fields above are what the model would
	// pick, which the simulator compiles the copy with.
	OneRank bool
}

// Line is NCCL's per-call TUNING line (2.28 format, rank 0); for a one-rank call, which NCCL
// prints none for, what it does instead.
func (c Choice) Line() string {
	if c.OneRank {
		return fmt.Sprintf("%s: %d Bytes -> one rank: a device memcpy, no algorithm (NCCL prints no line)", c.Func, c.Bytes)
	}
	return fmt.Sprintf("%s: %d Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}",
		c.Func, c.Bytes, c.Algo.LogName(), c.Proto.LogName(), c.ChannelLo, c.ChannelHi)
}

// Shown is the algorithm, protocol and channel count the choice stands for in simccl's outputs:
// its own, or for a one-rank call coll.OneRankAlgo, coll.OneRankProto and no channel, as rows
// show the plan (coll.Plan.ShownNames).
func (c Choice) Shown() (algo, proto string, nch int) {
	if c.OneRank {
		return coll.OneRankAlgo, coll.OneRankProto, 0
	}
	return c.Algo.String(), c.Proto.String(), c.NChannels
}

// Select tunes one call on its own (a group of one).
func (t *Table) Select(call Call) (Choice, error) {
	ch, err := t.SelectGroup([]Call{call})
	if err != nil {
		return Choice{}, err
	}
	return ch[0], nil
}

// SelectBytes tunes a call of nBytes as NCCL logs them (count × element size, per-rank count for
// AllGather/ReduceScatter) with 4-byte elements.
func (t *Table) SelectBytes(f coll.Func, nBytes int64) (Choice, error) {
	return t.Select(Call{Func: f, Count: nBytes / 4, ElemSize: 4})
}

// costTable is updateCollCostTable (NCCL 2.28 enqueue.cc: per-call rules, then ncclTopoGetAlgoTime).
func (t *Table) costTable(call Call, nBytes int64, numPipeOps int) CostTable {
	var ct CostTable
	for a := range ct {
		for p := range ct[a] {
			ct[a][p] = -1
		}
	}
	c := &t.Comm
	if c.NRanks == 1 {
		ct[coll.Ring][coll.Simple] = 0
		return ct
	}
	f := call.Func
	fp8 := call.DataType == 10 || call.DataType == 11
	for a := coll.Algo(0); a < coll.NumAlgos; a++ {
		if (a == coll.CollNetDirect || a == coll.CollNetChain) && (!c.CollNetSupport || c.maxLocalRanks() > 8) {
			continue
		}
		if (a == coll.NVLS || a == coll.NVLSTree) && (!c.NVLSSupport || (f != coll.AllReduce && c.maxLocalRanks() > 32)) {
			continue
		}
		if a == coll.NVLS && !c.CollNetSupport && c.NNodes > 1 {
			continue
		}
		if a == coll.PAT && f == coll.ReduceScatter && call.Op >= 4 {
			continue // PAT ReduceScatter has no Avg/PreMulSum
		}
		for p := coll.Proto(0); p < coll.NumProtos; p++ {
			ct[a][p] = t.Time(f, a, p, nBytes, numPipeOps)
			if fp8 && a == coll.Ring && c.NRanks > 8 && ct[a][p] >= 0 {
				ct[a][p] *= 1024
			}
		}
	}
	return ct
}

// pick is topoGetAlgoInfo (NCCL 2.28 enqueue.cc): the smallest non-negative time in index order, then the
// channel and thread counts.
func (t *Table) pick(f coll.Func, nBytes int64, ct CostTable) (a coll.Algo, p coll.Proto, tm float32, nc, nt int, err error) {
	minTime := float32(3600000000.0)
	a, p = -1, -1
	for ai := coll.Algo(0); ai < coll.NumAlgos; ai++ {
		for pi := coll.Proto(0); pi < coll.NumProtos; pi++ {
			if v := ct[ai][pi]; v >= 0 && v < minTime {
				a, p, minTime = ai, pi, v
			}
		}
	}
	if a < 0 {
		msg := fmt.Sprintf("tuning: no algorithm/protocol available for %s of %d bytes", f, nBytes)
		if t.Config.Algo != "" {
			msg += fmt.Sprintf(" (NCCL_ALGO=%q)", t.Config.Algo)
		}
		if t.Config.Proto != "" {
			msg += fmt.Sprintf(" (NCCL_PROTO=%q)", t.Config.Proto)
		}
		return 0, 0, 0, 0, 0, fmt.Errorf("%s", msg)
	}
	nc = t.NChannels
	nt = t.MaxThreads[a][p]
	thr := t.ThreadThresholds[a][p]
	switch a {
	case coll.CollNetDirect:
		heads := int64(max(1, t.Comm.CollNetDirectHeads))
		ncSwitch := 16
		flag := true
		for ncSwitch >= 1 && flag {
			for {
				flag = nBytes < int64(nc)*int64(nt)*heads*thr
				if !flag || nc <= ncSwitch {
					break
				}
				if nc == ncSwitch+ncSwitch/2 {
					thr /= 2
				}
				nc--
			}
			ncSwitch /= 2
		}
	case coll.NVLS, coll.NVLSTree:
		nc = t.NVLSChannels
		if t.Comm.NNodes > 1 && a == coll.NVLS {
			nc = min(t.NVLSChannels, t.NChannels)
		}
	default:
		for nBytes < int64(nc)*int64(nt)*thr && nc >= 2 {
			nc--
		}
	}
	if a != coll.NVLS && a != coll.NVLSTree && a != coll.CollNetDirect {
		for nBytes < int64(nc)*int64(nt)*thr && nt%128 == 0 {
			nt /= 2
		}
	}
	if p == coll.Simple {
		if a == coll.Ring {
			nt += warpSize
		}
		if a == coll.Tree {
			nt += 4 * warpSize
		}
	}
	if nt/warpSize < 3 {
		nt = 3 * warpSize
	}
	if a == coll.Tree || a == coll.PAT {
		nt = maxNThreads
	}
	return a, p, minTime, nc, nt, nil
}

type task struct {
	idx      int // position in the caller's slice
	call     Call
	traffic  int64
	choice   Choice
	collnet  bool
	nvls     bool
	nMaxChan int
}

// SelectGroup tunes the calls of one ncclGroupStart/End as NCCL 2.28 ncclPrepareTasks does: calls
// are binned by (function, op, datatype), sorted by traffic, aggregated when within 4× of the
// smallest of a run and tuned once per run with numPipeOps = ceil(#calls / nChannels); then
// scheduled onto channels in one plan (channel{Lo..Hi}). Choices come back in the caller's order.
// Plans are assumed not to overflow NCCL's per-launch work budget.
func (t *Table) SelectGroup(calls []Call) ([]Choice, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	nRanks := t.Comm.NRanks
	tasks := make([]*task, len(calls))
	for i, c := range calls {
		if err := checkFunc(c.Func); err != nil {
			return nil, err
		}
		if c.Count < 0 {
			return nil, fmt.Errorf("tuning: call %d (%s): negative count %d", i, c.Func, c.Count)
		}
		tasks[i] = &task{idx: i, call: c, traffic: c.Bytes() * trafficPerByte(c.Func, nRanks)}
	}
	// The sorter hands tasks out by traffic, largest first; binning by (fn, op, ty) reverses each bin.
	sorted := append([]*task(nil), tasks...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].traffic > sorted[j].traffic })
	type binKey struct{ f, op, ty int }
	var order []binKey
	bins := map[binKey][]*task{}
	for _, tk := range sorted {
		k := binKey{int(tk.call.Func), tk.call.Op, tk.call.DataType}
		if _, ok := bins[k]; !ok {
			order = append(order, k)
		}
		bins[k] = append(bins[k], tk)
	}
	for _, b := range bins { // each bin is a LIFO of the size-descending stream: smallest first
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
	}
	numPipeOps := (len(calls) + t.NChannels - 1) / t.NChannels
	var queue [2][2][]*task // [collnet][nvls]
	for _, k := range order {
		b := bins[k]
		for i := 0; i < len(b); {
			beg := b[i]
			j := i + 1
			agg := beg.call
			for j < len(b) && b[j].traffic < 4*beg.traffic {
				agg.Count += b[j].call.Count
				j++
			}
			ch, err := t.selectOne(agg, numPipeOps)
			if err != nil {
				return nil, err
			}
			for _, tk := range b[i:j] {
				tk.choice = ch
				tk.choice.Bytes = tk.call.Bytes()
				if ch.Proto == coll.LL {
					tk.traffic *= 4
				}
				tk.nMaxChan = ch.MaxChannels
				tk.nvls = ch.Algo == coll.NVLS || ch.Algo == coll.NVLSTree
				tk.collnet = ch.Algo == coll.CollNetDirect || ch.Algo == coll.CollNetChain || (ch.Algo == coll.NVLS && t.Comm.NNodes > 1)
				queue[b2i(tk.collnet)][b2i(tk.nvls)] = append(queue[b2i(tk.collnet)][b2i(tk.nvls)], tk)
			}
			i = j
		}
	}
	var plan []*task
	for cn := 0; cn < 2; cn++ {
		for nv := 0; nv < 2; nv++ {
			plan = append(plan, queue[cn][nv]...)
		}
	}
	for i, tk := range plan {
		tk.choice.PlanIndex = i
	}
	t.schedule(plan)
	out := make([]Choice, len(calls))
	for _, tk := range tasks {
		out[tk.idx] = tk.choice
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// selectOne runs the cost table, the overrides and topoGetAlgoInfo for one (possibly aggregated)
// call.
func (t *Table) selectOne(call Call, numPipeOps int) (Choice, error) {
	nBytes := call.TuneBytes(t.Comm.NRanks)
	ct := t.costTable(call, nBytes, numPipeOps)
	rule, chans := t.applyOverrides(call.Func, nBytes, &ct)
	a, p, tm, nc, nt, err := t.pick(call.Func, nBytes, ct)
	if err != nil {
		return Choice{}, err
	}
	if chans > 0 {
		nc = chans
	}
	return Choice{Func: call.Func, Bytes: call.Bytes(), Algo: a, Proto: p, MaxChannels: nc, NThreads: nt,
		TimeUs: tm, Cost: ct, Override: rule}, nil
}

// schedule is scheduleCollTasksToPlan (enqueue.cc): it spreads the plan's calls over channels in
// traffic cells and sets ChannelLo/Hi, NChannels and ChunkSize of every choice.
func (t *Table) schedule(plan []*task) {
	k := t.K
	minTraffic := k.MinTrafficPerChannel
	nMax := [4]int{t.NChannels, t.NVLSChannels, t.NChannels, min(t.NChannels, t.NVLSChannels)}
	var traffic [4]int64
	var nCh [4]int
	for _, tk := range plan {
		kind := 2*b2i(tk.collnet) + b2i(tk.nvls)
		traffic[kind] += max(minTraffic, tk.traffic)
		nCh[kind] = min(nCh[kind]+tk.nMaxChan, nMax[kind])
	}
	kindPrev := -1
	var perChannel, current int64
	channelID := 0
	nRanks := t.Comm.NRanks
	for _, tk := range plan {
		kind := 2*b2i(tk.collnet) + b2i(tk.nvls)
		if kind != kindPrev {
			if k.TrafficPerChannelRoundUp {
				perChannel = (traffic[kind]/int64(max(1, nCh[kind])) + 15) / 16 * 16
			} else {
				perChannel = max(minTraffic, traffic[kind]/int64(max(1, nCh[kind])))
			}
			kindPrev = kind
			channelID = 0
			current = 0
		}
		ch := &tk.choice
		eltSize := tk.call.elemSize()
		globalPerElt := eltSize
		if f := tk.call.Func; f == coll.AllGather || f == coll.ReduceScatter {
			globalPerElt *= int64(nRanks)
		}
		if tk.collnet {
			ch.ChannelLo, ch.ChannelHi = 0, tk.nMaxChan-1
			ch.NChannels = tk.nMaxChan
			ch.ChunkSize = t.ChunkSize(ch.Func, ch.Algo, ch.Proto, tk.nMaxChan, globalPerElt*tk.call.Count)
			continue
		}
		tpb := trafficPerByte(tk.call.Func, nRanks)
		if ch.Proto == coll.LL {
			tpb *= 4
		}
		cellSize := ceilDiv(ceilDiv(minTraffic, tpb), 16) * 16
		eltsPerCell := cellSize / eltSize
		count := tk.call.Count
		cells := ceilDiv(count*eltSize, cellSize)
		trafficPerElt := eltSize * tpb
		trafficPerCell := cellSize * tpb
		cellsPerChannel := min(cells, ceilDiv(perChannel, trafficPerCell))
		var cellsLo int64
		if channelID+1 == nMax[kind] {
			cellsLo = cells
		} else {
			cellsLo = min(cells, ceilDiv(perChannel-current, trafficPerCell))
		}
		var nMid, cellsHi int64
		if cellsPerChannel > 0 {
			nMid = (cells - cellsLo) / cellsPerChannel
			cellsHi = (cells - cellsLo) % cellsPerChannel
		}
		n := b2i(cellsLo != 0) + int(nMid) + b2i(cellsHi != 0)
		if nMax[kind] < channelID+n {
			nMid = int64(nMax[kind] - channelID - 2)
			cellsPerChannel = (cells - cellsLo) / (nMid + 1)
			cellsHi = cellsPerChannel + (cells-cellsLo)%(nMid+1)
		}
		if cellsHi == 0 && nMid != 0 {
			cellsHi = cellsPerChannel
			nMid--
		}
		if cellsLo == 0 {
			channelID++
			if nMid == 0 {
				cellsLo, cellsHi = cellsHi, 0
			} else {
				cellsLo = cellsPerChannel
				nMid--
			}
		}
		countMid := int64(0)
		if nMid != 0 {
			countMid = cellsPerChannel * eltsPerCell
		}
		countLo := cellsLo * eltsPerCell
		countHi := cellsHi * eltsPerCell
		if countHi != 0 {
			countHi -= cells*eltsPerCell - count
		} else {
			countLo -= cells*eltsPerCell - count
		}
		n = b2i(countLo != 0) + int(nMid) + b2i(cellsHi != 0)
		if n < 1 {
			n = 1 // a zero-byte call still occupies its first channel
		}
		ch.ChannelLo, ch.ChannelHi, ch.NChannels = channelID, channelID+n-1, n
		part := countLo
		if part == 0 {
			part = max(countMid, countHi)
		}
		ch.ChunkSize = t.ChunkSize(ch.Func, ch.Algo, ch.Proto, 1, globalPerElt*part)
		switch {
		case countHi != 0:
			channelID += n - 1
			current = cellsHi * eltsPerCell * trafficPerElt
		case nMid != 0:
			channelID += n
			current = 0
		default:
			current += cellsLo * eltsPerCell * trafficPerElt
		}
		if current >= perChannel && channelID+1 != nMax[kind] {
			channelID++
			current = 0
		}
	}
}

func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// ChunkSize is calcCollChunking's chunk in bytes (NCCL 2.28 enqueue.cc) for nBytes (global bytes of
// the part) on nChannels channels, rounded down to the protocol grain.
func (t *Table) ChunkSize(f coll.Func, a coll.Algo, p coll.Proto, nChannels int, nBytes int64) int64 {
	cfg := &t.Config
	c := &t.Comm
	step := cfg.buffSize(p) / ncclSteps
	chunkSteps := int64(1)
	if p == coll.Simple && a == coll.Ring {
		if f == coll.AllReduce || f == coll.AllGather || f == coll.ReduceScatter {
			chunkSteps = ncclSteps / 2
		}
	}
	chunk := step * chunkSteps
	switch p {
	case coll.LL:
		chunk /= 2
	case coll.LL128:
		chunk = chunk / 16 * 15 // NCCL_LL128_LINEELEMS / NCCL_LL128_DATAELEMS
	}
	nc := int64(max(1, nChannels))
	switch {
	case a == coll.CollNetDirect:
		heads := int64(max(1, c.CollNetDirectHeads))
		depth := int64(max(1, c.CollNetDirectDepth))
		for nBytes/(nc*heads*chunk) < depth*64 && chunk > 131072 {
			chunk /= 2
		}
		for nBytes/(nc*heads*chunk) < depth*8 && chunk > 65536 {
			chunk /= 2
		}
		for nBytes/(nc*heads*chunk) < depth*8 && chunk > 32768 {
			chunk /= 2
		}
	case a == coll.CollNetChain:
		depth := int64(max(1, c.CollNetChainDepth))
		chunk = min(256*1024, cfg.buffSize(coll.Simple)/ncclSteps*chunkSteps)
		for nBytes/(nc*chunk) < depth*64 && chunk > 131072 {
			chunk /= 2
		}
		for nBytes/(nc*chunk) < depth*8 && chunk > 65536 {
			chunk /= 2
		}
		for nBytes/(nc*chunk) < depth && chunk > 32768 {
			chunk /= 2
		}
	case a == coll.NVLS:
		maxChunk := int64(nvlsChunkSize)
		if cfg.NVLSChunkSize > 0 {
			maxChunk = cfg.NVLSChunkSize
		}
		if c.NNodes > 1 && t.Bw[coll.AllReduce][coll.NVLS][coll.Simple] < 150 {
			maxChunk = 32768
		}
		chunk = min(chunk, maxChunk)
		ops := nc * int64(t.nvlsHeads())
		if nBytes < 64*ops*chunk && chunk > 65536 {
			chunk = 65536
		}
		if nBytes < 8*ops*chunk && chunk > 32768 {
			chunk = 32768
		}
		if nBytes < 2*ops*chunk && chunk > 16384 {
			chunk = 16384
		}
	case a == coll.NVLSTree:
		ops := nc * int64(t.nvlsHeads())
		chunk = int64(nvlsChunkSize)
		if cfg.NVLSChunkSize > 0 {
			chunk = cfg.NVLSChunkSize
		}
		if c.NNodes >= 4 {
			chunk = min(chunk, 65536)
		}
		for _, s := range []struct{ mul, to int64 }{{32, 262144}, {16, 131072}, {4, 65536}, {1, 32768}} {
			if nBytes < s.mul*ops*chunk && chunk > s.to {
				chunk = s.to
			}
		}
	case a == coll.Tree && p == coll.LL128:
		ppn := c.ppn()
		nsteps := 1 + float64(log2i(int64(c.NNodes))) + 0.1*ppn
		for float64(nBytes/(nc*chunk)) < nsteps*64/ppn && chunk > 131072 {
			chunk /= 2
		}
		for float64(nBytes/(nc*chunk)) < nsteps*16/ppn && chunk > 32768 {
			chunk /= 2
		}
	case a == coll.PAT && f == coll.AllGather:
		for chunk*nc*32 > nBytes && chunk > 65536 {
			chunk /= 2
		}
	case a == coll.PAT && f == coll.ReduceScatter:
		for chunk*nc*16 > nBytes && chunk > 65536 {
			chunk /= 2
		}
	}
	g := grainSize(p)
	return chunk / g * g
}

func (t *Table) nvlsHeads() int {
	if t.Comm.NVLSHeads > 0 {
		return t.Comm.NVLSHeads
	}
	return max(1, t.Comm.NRanks/t.Comm.NNodes)
}
