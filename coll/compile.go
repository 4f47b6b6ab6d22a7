package coll

import (
	"errors"
	"fmt"
	"math"
)

// ErrUnsupported reports a function × algorithm combination Compile does not model.
var ErrUnsupported = errors.New("coll: unsupported")

// MaxChannels is MAXCHANNELS (NCCL 2.30.7): at most 64 channels.
const MaxChannels = 64

// MaxSteps bounds the size of a compiled schedule (all ranks, all channels), so that a huge request
// fails with an error instead of exhausting memory (a step costs about 500 bytes; compiling runs at
// roughly 1.5 µs per step: 65 000 steps for a 64-rank 256 MiB ring all-reduce on 4 channels).
const MaxSteps = 5_000_000

// Supported reports whether Compile models function f with algorithm a.
func Supported(f Func, a Algo) bool {
	if f == SendRecv || f == AllToAll {
		return true // grouped point-to-point: no collective algorithm
	}
	switch a {
	case Ring:
		return f <= AllReduce
	case Tree:
		return f == AllReduce
	case PAT:
		return f == AllGather || f == ReduceScatter
	}
	return false
}

// NeedsSwitches reports whether Compile models f with a, through switch endpoints (Schedule.Switches,
// rule 6 of the contract): NVLS AllReduce, AllGather and ReduceScatter within one node, NVLS
// AllReduce across nodes (with the network's reduction, CollNet), and NVLSTree, CollNetChain and
// CollNetDirect AllReduce. Executors that do not run switch programs should use Supported alone.
func NeedsSwitches(f Func, a Algo) bool {
	switch a {
	case NVLS:
		return f == AllReduce || f == AllGather || f == ReduceScatter
	case NVLSTree, CollNetChain, CollNetDirect:
		return f == AllReduce
	}
	return false
}

// Compile turns one collective, or a group of them (run one after another on every channel, as
// NCCL runs the work items of a group), into a Schedule. Every plan must have the same NRanks.
func Compile(plans ...Plan) (*Schedule, error) {
	if len(plans) == 0 {
		return nil, fmt.Errorf("coll: Compile: no operations")
	}
	n := plans[0].NRanks
	nch := 0
	var switches []Switch
	nvlsNodes, collnet := 0, false
	for i := range plans {
		p := &plans[i]
		if p.NRanks != n {
			return nil, fmt.Errorf("coll: Compile: operation %d has %d ranks, operation 0 has %d", i, p.NRanks, n)
		}
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("coll: Compile: operation %d (%v): %w", i, p.Func, err)
		}
		if c := p.ChannelLo + p.channelSpan(); c > nch {
			nch = c
		}
		if p.NRanks > 1 && NeedsSwitches(p.Func, p.Algo) {
			if p.Algo == NVLS || p.Algo == NVLSTree {
				nn := max(1, p.NNodes)
				if nvlsNodes != 0 && nn != nvlsNodes {
					return nil, fmt.Errorf("coll: Compile: operation %d puts NVLS on %d nodes, an earlier one on %d", i, nn, nvlsNodes)
				}
				nvlsNodes = nn
			}
			// CollNetChain, and NVLS across nodes (NVLS with CollNet): the network reduces.
			collnet = collnet || p.Algo == CollNetChain || p.Algo == CollNetDirect || (p.Algo == NVLS && p.NNodes > 1)
		}
	}
	for node := 0; node < nvlsNodes; node++ { // one NVSwitch per node
		switches = append(switches, Switch{ID: n + len(switches), Kind: SwitchNVLS, Node: node})
	}
	if collnet {
		switches = append(switches, Switch{ID: n + len(switches), Kind: SwitchCollNet, Node: -1})
	}
	b := newBuilder(n, nch, switches)
	for i := range plans {
		if err := b.addOp(&plans[i]); err != nil {
			return nil, fmt.Errorf("coll: Compile: operation %d (%v %v): %w", i, plans[i].Func, plans[i].Algo, err)
		}
	}
	return b.finish(), nil
}

// Check returns the error Compile(plans...) would return for its arguments and size, without
// compiling: a schedule that is too large, a plan it cannot compile.
func Check(plans ...Plan) error {
	for i := range plans {
		if err := plans[i].check(); err != nil {
			return fmt.Errorf("coll: Compile: operation %d (%v): %w", i, plans[i].Func, err)
		}
	}
	return nil
}

func (p *Plan) nChannels() int {
	if p.NChannels <= 0 {
		return 1
	}
	return p.NChannels
}

// channelSpan is the channels the plan's schedule spreads over: a point-to-point plan's transfers
// (NChannels each) share its P2PChannels; a collective uses NChannels.
func (p *Plan) channelSpan() int {
	if p.Func == SendRecv || p.Func == AllToAll {
		return max(p.P2PChannels, p.nChannels())
	}
	return p.nChannels()
}

// checkArgs validates a plan's fields, naming the bad one.
func (p *Plan) checkArgs() error {
	n := p.NRanks
	if n < 1 {
		return fmt.Errorf("NRanks %d: want at least 1", n)
	}
	if n > 1<<20 {
		return fmt.Errorf("NRanks %d: too many ranks to compile a schedule for", n)
	}
	if p.DataType.Size() == 0 {
		return fmt.Errorf("data type %v unknown", p.DataType)
	}
	if p.Op < 0 || p.Op >= NumRedOps {
		return fmt.Errorf("reduction %v unknown", p.Op)
	}
	if p.Count < 0 {
		return fmt.Errorf("count %d is negative", p.Count)
	}
	if p.Count > (1<<50)/int64(p.DataType.Size()) {
		return fmt.Errorf("count %d too large", p.Count)
	}
	if p.NChannels < 0 || p.NChannels > MaxChannels {
		return fmt.Errorf("NChannels %d: want 1..%d", p.NChannels, MaxChannels)
	}
	if p.P2PChannels < 0 || p.P2PChannels > MaxChannels {
		return fmt.Errorf("P2PChannels %d: want 0..%d", p.P2PChannels, MaxChannels)
	}
	if p.ChannelLo < 0 || p.ChannelLo+p.channelSpan() > MaxChannels {
		return fmt.Errorf("channels %d..%d outside 0..%d", p.ChannelLo, p.ChannelLo+p.channelSpan()-1, MaxChannels-1)
	}
	if p.Parts != nil {
		if len(p.Parts) != p.nChannels() {
			return fmt.Errorf("%d parts for %d channels", len(p.Parts), p.nChannels())
		}
		var sum int64
		for c, x := range p.Parts {
			if x < 0 {
				return fmt.Errorf("part %d is negative (%d)", c, x)
			}
			sum += x
		}
		if sum != p.Count {
			return fmt.Errorf("parts sum to %d, count is %d", sum, p.Count)
		}
	}
	if p.Proto < 0 || p.Proto >= NumProtos {
		return fmt.Errorf("protocol %v unknown", p.Proto)
	}
	if p.Algo < 0 || p.Algo >= NumAlgos {
		return fmt.Errorf("algorithm %v unknown", p.Algo)
	}
	if p.Func < 0 || p.Func > AllToAll {
		return fmt.Errorf("function %v unknown", p.Func)
	}
	if !Supported(p.Func, p.Algo) && !NeedsSwitches(p.Func, p.Algo) {
		return fmt.Errorf("%w: %v with algorithm %v (supported: Ring for all collectives, Tree, NVLSTree and CollNetChain for AllReduce, NVLS (one node) for AllReduce/AllGather/ReduceScatter, PAT for AllGather/ReduceScatter; SendRecv/AllToAll ignore the algorithm)", ErrUnsupported, p.Func, p.Algo)
	}
	if p.ChunkSize < 0 {
		return fmt.Errorf("chunk size %d is negative", p.ChunkSize)
	}
	if p.ChunkSize > 0 && p.ChunkSize < int64(p.DataType.Size()) {
		return fmt.Errorf("chunk size %d is smaller than one %v element", p.ChunkSize, p.DataType)
	}
	for pr, s := range p.BuffSize {
		if s < 0 || (s > 0 && s < MinBuffSize(Proto(pr))) {
			return fmt.Errorf("buffer size %d for %v: want 0 (default) or at least %d", s, Proto(pr), MinBuffSize(Proto(pr)))
		}
	}
	if p.Func == Broadcast || p.Func == Reduce {
		if p.Root < 0 || p.Root >= n {
			return fmt.Errorf("root %d out of range 0..%d", p.Root, n-1)
		}
	}
	if p.Rings != nil {
		if len(p.Rings) < p.ChannelLo+p.nChannels() {
			return fmt.Errorf("%d rings for channels up to %d", len(p.Rings), p.ChannelLo+p.nChannels()-1)
		}
		for c := p.ChannelLo; c < p.ChannelLo+p.nChannels(); c++ {
			if err := checkPerm(p.Rings[c], n); err != nil {
				return fmt.Errorf("ring of channel %d: %w", c, err)
			}
		}
	}
	if p.Trees != nil {
		if len(p.Trees) < p.ChannelLo+p.nChannels() {
			return fmt.Errorf("%d trees for channels up to %d", len(p.Trees), p.ChannelLo+p.nChannels()-1)
		}
		for c := p.ChannelLo; c < p.ChannelLo+p.nChannels(); c++ {
			if len(p.Trees[c].Up) != n {
				return fmt.Errorf("tree of channel %d covers %d ranks, want %d", c, len(p.Trees[c].Up), n)
			}
			if err := CheckTree(p.Trees[c]); err != nil {
				return fmt.Errorf("tree of channel %d: %w", c, err)
			}
		}
	}
	if p.NNodes < 0 || (p.NNodes > 0 && n%p.NNodes != 0) {
		return fmt.Errorf("NNodes %d does not divide %d ranks", p.NNodes, n)
	}
	if p.NodeTrees != nil {
		if p.Algo != NVLSTree {
			return fmt.Errorf("NodeTrees given for %v (NVLSTree only)", p.Algo)
		}
		if len(p.NodeTrees) < p.ChannelLo+p.nChannels() {
			return fmt.Errorf("%d node trees for channels up to %d", len(p.NodeTrees), p.ChannelLo+p.nChannels()-1)
		}
		for c := p.ChannelLo; c < p.ChannelLo+p.nChannels(); c++ {
			if len(p.NodeTrees[c].Up) != max(1, p.NNodes) {
				return fmt.Errorf("node tree of channel %d covers %d nodes, want %d", c, len(p.NodeTrees[c].Up), max(1, p.NNodes))
			}
			t := p.NodeTrees[c]
			if err := checkTree(t, 0); err != nil {
				return fmt.Errorf("node tree of channel %d: %w", c, err)
			}
			if t.Loose != nil && len(t.Loose) != len(t.Up) {
				return fmt.Errorf("node tree of channel %d: %d loose lists for %d nodes", c, len(t.Loose), len(t.Up))
			}
			for x, ls := range t.Loose {
				for _, d := range ls {
					if !contains(t.Down[x], d) {
						return fmt.Errorf("node tree of channel %d: node %d's loose child %d is no child", c, x, d)
					}
				}
			}
		}
	}
	if NeedsSwitches(p.Func, p.Algo) && p.Proto != Simple {
		return fmt.Errorf("%w: %v with %v (NVLS and CollNet run Simple only, NCCL 2.28 ncclTopoTuneModel)", ErrUnsupported, p.Algo, p.Proto)
	}
	ppn := n / max(p.NNodes, 1)
	if p.Algo == CollNetDirect && p.Func == AllReduce {
		if err := checkHeads("CollNet", p.CollNetHeads, ppn); err != nil {
			return err
		}
	}
	if len(p.NVLSHeads) > 0 {
		if p.Algo != NVLS && p.Algo != NVLSTree {
			return fmt.Errorf("NVLSHeads given for %v (NVLS and NVLSTree only)", p.Algo)
		}
		if err := checkHeads("NVLS", p.NVLSHeads, ppn); err != nil {
			return err
		}
	}
	if p.Algo == NVLS && p.NNodes > 1 && p.Func != AllReduce {
		// NCCL 2.28 runs NVLS across nodes with CollNet (SHARP) for AllReduce only here.
		return fmt.Errorf("%w: NVLS %v across %d nodes (AllReduce only, with CollNet)", ErrUnsupported, p.Func, p.NNodes)
	}
	var transferBytes int64
	if p.Func == SendRecv {
		for i, t := range p.Transfers {
			if t.From < 0 || t.From >= n || t.To < 0 || t.To >= n {
				return fmt.Errorf("transfer %d: %d→%d out of range 0..%d", i, t.From, t.To, n-1)
			}
			if t.Count < 0 || t.Count > (1<<50)/int64(p.DataType.Size()) {
				return fmt.Errorf("transfer %d: count %d out of range", i, t.Count)
			}
			if t.NChannels < 0 || t.ChunkSize < 0 {
				return fmt.Errorf("transfer %d: %d channels, chunk size %d", i, t.NChannels, t.ChunkSize)
			}
			transferBytes += t.Count * int64(p.DataType.Size())
			if transferBytes > 1<<50 {
				return fmt.Errorf("transfers total more than %d bytes", int64(1)<<50)
			}
		}
	}
	return nil
}

// check validates a plan's fields and that its schedule has a size Compile can hold.
func (p *Plan) check() error {
	if err := p.checkArgs(); err != nil {
		return err
	}
	est := p.EstimatedSteps()
	if est > MaxSteps {
		return fmt.Errorf("schedule would have about %.3g steps (limit %d): use fewer ranks, a smaller count or a larger chunk", est, MaxSteps)
	}
	return nil
}

// checkHeads checks a plan's heads of a kind: distinct local ranks of nodes of ppn ranks.
func checkHeads(kind string, heads []int, ppn int) error {
	seen := map[int]bool{}
	for _, h := range heads {
		if h < 0 || h >= ppn || seen[h] {
			return fmt.Errorf("%s heads %v: want distinct local ranks 0..%d", kind, heads, ppn-1)
		}
		seen[h] = true
	}
	return nil
}

// EstimatedSteps is the rough upper estimate of the schedule's steps (all ranks and channels)
// that Compile checks against MaxSteps before compiling: steps grow with ranks × chunks. The
// arguments must have been checked (Compile does).
func (p *Plan) EstimatedSteps() float64 {
	n := p.NRanks
	// Rough size guard: steps grow with ranks × chunks.
	chunk := p.ChunkSize
	if chunk == 0 {
		chunk = DefaultChunkSize(p.Func, p.Algo, p.Proto, p.BuffSize[p.Proto])
	}
	// In float64: the products overflow int64 for absurd inputs, which must fail here, not later.
	elt := float64(p.DataType.Size())
	nc := float64(p.nChannels())
	nr := float64(n)
	chunks := func(bytes float64) float64 { return math.Ceil(bytes/float64(chunk)) + nc }
	var est float64
	switch {
	case len(p.Transfers) > 0 && p.Func == SendRecv:
		// Each transfer in chunks of its own size (NCCL_P2P_*_CHUNKSIZE may make them tiny).
		for _, t := range p.Transfers {
			c := float64(p.p2pChunking(p2pMsg{chunk: t.ChunkSize, ll: t.LL}).chunkElems) * elt
			est += 2 * (math.Ceil(float64(t.Count)*elt/c) + nc)
		}
	case p.Func == SendRecv || p.Func == AllToAll:
		c := float64(p.p2pChunking(p2pMsg{}).chunkElems) * elt
		est = 2 * nr * (math.Ceil(float64(p.Count)*elt/c) + nc)
		if p.Func == AllToAll {
			est *= nr
		}
	case p.Algo == CollNetChain:
		// Each (rank, channel) program takes two steps per chunk (up the chain, down it); the
		// network's program one.
		est = nr * nc * (3*math.Ceil(float64(p.Count)*elt/float64(chunk)/nc) + 4)
	case p.Algo == NVLS || p.Algo == NVLSTree || p.Algo == CollNetDirect:
		// Each (rank, channel) program takes about 2.5 steps per chunk of its channel and, per
		// launch, two per rank of its node (scatter to and gather from the switch's shares, or
		// CollNetDirect's heads): 3 and 2 bound the compiled counts of the DGX H100 and GB200
		// NVL72 schedules (TestEstimatedStepsSwitches).
		ppn := nr / float64(max(p.NNodes, 1))
		if p.Algo != CollNetDirect {
			ppn = float64(p.NVLSHeadCount())
		}
		bytes := float64(p.Count) * elt
		if p.Func == AllGather || p.Func == ReduceScatter {
			bytes *= nr
		}
		est = nr * nc * (3*math.Ceil(bytes/float64(chunk)/nc) + 2*ppn + 4)
	case p.Algo == PAT:
		// Every rank runs one step per block position (n of them) per chunk of its channel's
		// part (at most count/nc, plus the alignment, elements).
		est = nr * nr * nc * math.Ceil((float64(p.Count)*elt/nc+16)/float64(chunk))
	case p.Func == Broadcast || p.Func == Reduce:
		// A chain along the ring: each rank takes one step per chunk of each channel.
		est = chunks(float64(p.Count)*elt)*4*nr + 4*nr*nc
	default:
		bytes := float64(p.Count) * elt
		if p.Func == AllGather || p.Func == ReduceScatter {
			bytes *= nr
		}
		est = chunks(bytes)*4*nr + 4*nr*nr*nc
	}
	return est
}

type connKey struct{ ch, from, to, idx int }

// connState tracks sequence numbers and slots of one connection while compiling.
type connState struct {
	sendSeq, recvSeq   int
	sendStep, recvStep int     // cumulative slot counters
	ends               []int64 // ends[seq−endsFrom] = sendStep after message seq (for credits)
	endsFrom           int     // the first message ends holds: those before credit are dropped
	credit             int     // first candidate for CreditSeq
	slots              int     // slots a send may run ahead of the receiver (0: NCCLSteps; builder.fifos)
}

type progState struct {
	laneLast []laneStep // last step index per lane within the current op (a few lanes)
	barrier  []int      // last steps of every lane of the previous ops
}

// laneStep is a lane's last step within the current op.
type laneStep struct{ lane, idx int }

// last is the index of lane's last step within the current op, false where it has none.
func (ps *progState) last(lane int) (int, bool) {
	for _, l := range ps.laneLast {
		if l.lane == lane {
			return l.idx, true
		}
	}
	return 0, false
}

// setLast makes idx lane's last step within the current op.
func (ps *progState) setLast(lane, idx int) {
	for i := range ps.laneLast {
		if ps.laneLast[i].lane == lane {
			ps.laneLast[i].idx = idx
			return
		}
	}
	ps.laneLast = append(ps.laneLast, laneStep{lane, idx})
}

type builder struct {
	s         *Schedule
	conns     map[uint64]int32 // connection ids by channel, index and ends (conn)
	connCache *[1 << connCacheBits]connCacheEntry
	cst       []connState
	ps        []progState
	op        int
	base      int // the current operation's first channel (Plan.ChannelLo)
	// Slabs the steps' small slices and buffer references are cut from (one allocation for
	// many steps instead of one per step; each cut is capped at its length, so an append to a
	// step's slice copies it out rather than overwrite its neighbour's).
	xslab []Xfer
	// keepX: the full transfer slabs are kept in xslabs (a fork, whose connections join
	// renumbers)
	keepX  bool
	xslabs [][]Xfer
	islab  []int
	rslab  []BufRef
	sl     []int64 // emit's slices of the current call
	peers  []int   // scratch peer lists of the switch schedules' calls (emit keeps none)
}

// connCacheBits is the log2 of the entries of the builder's cache of connection look-ups.
const connCacheBits = 12

type connCacheEntry struct {
	key uint64 // the connection's key + 1 (0: empty)
	id  int32
}

// slabLen is the elements of a builder slab.
const slabLen = 4096

// xfers is a slice of length 0 and capacity n from the builder's slab (nil for n = 0).
func (b *builder) xfers(n int) []Xfer {
	if n == 0 {
		return nil
	}
	if len(b.xslab)+n > cap(b.xslab) {
		if b.keepX && len(b.xslab) > 0 {
			b.xslabs = append(b.xslabs, b.xslab)
		}
		b.xslab = make([]Xfer, 0, max(slabLen, n))
	}
	k := len(b.xslab)
	b.xslab = b.xslab[:k+n]
	return b.xslab[k : k : k+n]
}

// ints is a copy of a from the builder's slab, its capacity its length.
func (b *builder) ints(a ...int) []int {
	n := len(a)
	if len(b.islab)+n > cap(b.islab) {
		b.islab = make([]int, 0, max(slabLen, n))
	}
	k := len(b.islab)
	b.islab = append(b.islab, a...)
	return b.islab[k : k+n : k+n]
}

// bufRef is a pointer to a copy of r from the builder's slab.
func (b *builder) bufRef(r BufRef) *BufRef {
	if len(b.rslab) == cap(b.rslab) {
		b.rslab = make([]BufRef, 0, slabLen)
	}
	b.rslab = append(b.rslab, r)
	return &b.rslab[len(b.rslab)-1]
}

func newBuilder(n, nch int, switches []Switch) *builder {
	ne := n + len(switches)
	b := &builder{
		s:         &Schedule{NRanks: n, NChannels: nch, Switches: switches, Programs: make([]Program, ne*nch)},
		conns:     map[uint64]int32{},
		connCache: new([1 << connCacheBits]connCacheEntry),
		ps:        make([]progState, ne*nch),
	}
	for r := 0; r < ne; r++ {
		for c := 0; c < nch; c++ {
			b.s.Programs[r*nch+c] = Program{Rank: r, Channel: c}
		}
	}
	return b
}

// connWord is the key of a connection in builder.conns: one word (channels < 64, connection
// indexes < 256, endpoints < 2^24: Compile takes at most 2^20 ranks and one switch per node and
// one for the network).
func connWord(ch, from, to, idx int) uint64 {
	return uint64(ch)<<56 | uint64(idx&0xff)<<48 | uint64(from)<<24 | uint64(to)
}

func (b *builder) conn(ch, from, to, idx int) int {
	k := connWord(ch, from, to, idx)
	// A direct-mapped cache of recent look-ups in front of the map (a connection comes back
	// every chunk); its entries hold key+1, so that the zero entry matches no key.
	slot := &b.connCache[(k*0x9e3779b97f4a7c15)>>(64-connCacheBits)]
	if slot.key == k+1 {
		return int(slot.id)
	}
	if id, ok := b.conns[k]; ok {
		*slot = connCacheEntry{k + 1, id}
		return int(id)
	}
	id := len(b.s.Conns)
	b.conns[k] = int32(id)
	*slot = connCacheEntry{k + 1, int32(id)}
	b.s.Conns = append(b.s.Conns, Conn{ID: id, Channel: ch, From: from, To: to, ConnIndex: idx})
	b.cst = append(b.cst, connState{})
	return id
}

// beginOp closes the previous operation: its lanes' last steps become the barrier of the next.
func (b *builder) beginOp() {
	for i := range b.ps {
		b.ps[i].close()
	}
}

// close ends what a program has emitted so far: the last steps of its lanes become the barrier
// that the next step of every lane waits for.
func (ps *progState) close() {
	if len(ps.laneLast) > 0 {
		ps.barrier = ps.barrier[:0:0]
		for _, l := range ps.laneLast {
			ps.barrier = append(ps.barrier, l.idx)
		}
		sortInts(ps.barrier)
		ps.laneLast = ps.laneLast[:0]
	}
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// call describes one primitive call before it is cut into slices.
type call struct {
	rank, ch, lane int
	prim           Prim
	recvFrom       []int // peers
	sendTo         []int
	src, dst       *BufRef // offsets in bytes at the start of the call
	nelem          int64
	chunk          int
	postOp         bool
	connIdx        int // connection index of the messages (receives and sends)
	sendIdx        int // connection index of the sends when hasSendIdx (a switch turning a direction)
	hasSendIdx     bool
	// recvIdxs and sendIdxs, where set, are the connection index of each peer of recvFrom and
	// sendTo (a PAT fold's connections, one index per distance: CompilePATFold).
	recvIdxs, sendIdxs []int
}

// emit appends the steps of one primitive call (one per slice) to the rank's program.
func (b *builder) emit(ck *chunking, c call) {
	c.ch += b.base
	prog := &b.s.Programs[c.rank*b.s.NChannels+c.ch]
	ps := &b.ps[c.rank*b.s.NChannels+c.ch]
	off := int64(0)
	b.sl = ck.appendSlices(b.sl[:0], c.nelem)
	for si, ne := range b.sl {
		idx := len(prog.Steps)
		st := Step{Index: int32(idx), Op: int32(b.op), Prim: c.prim, Lane: int32(c.lane), Bytes: ne * ck.elt,
			Proto: ck.proto, Chunk: int32(c.chunk), Slice: int32(si), PostOp: c.postOp}
		st.Wire = WireBytes(ck.proto, st.Bytes)
		switch last, ok := ps.last(c.lane); {
		case c.rank >= b.s.NRanks:
			// A switch acts on each message as it arrives (rule 6): no order among its steps.
		case ok:
			st.Deps = b.ints(last)
		case len(ps.barrier) > 0:
			st.Deps = b.ints(ps.barrier...)
		}
		if c.src != nil {
			st.Src = b.bufRef(BufRef{Buf: c.src.Buf, Offset: c.src.Offset + off})
		}
		if c.dst != nil {
			st.Dst = b.bufRef(BufRef{Buf: c.dst.Buf, Offset: c.dst.Offset + off})
		}
		st.Recv = b.xfers(len(c.recvFrom))
		st.Send = b.xfers(len(c.sendTo))
		steps := ck.stepsPerSlice
		for i, peer := range c.recvFrom {
			idx := c.connIdx
			if c.recvIdxs != nil {
				idx = c.recvIdxs[i]
			}
			id := b.conn(c.ch, peer, c.rank, idx)
			cs := &b.cst[id]
			st.Recv = append(st.Recv, Xfer{Conn: int32(id), Peer: int32(peer), Seq: int32(cs.recvSeq), Slot: int32(cs.recvStep % NCCLSteps), Steps: int32(steps), CreditSeq: -1})
			cs.recvSeq++
			cs.recvStep += steps
		}
		sidx := c.connIdx
		if c.hasSendIdx {
			sidx = c.sendIdx
		}
		for i, peer := range c.sendTo {
			if c.sendIdxs != nil {
				sidx = c.sendIdxs[i]
			}
			id := b.conn(c.ch, c.rank, peer, sidx)
			cs := &b.cst[id]
			start := int64(cs.sendStep)
			slots := int64(NCCLSteps)
			if cs.slots > 0 {
				slots = int64(cs.slots)
			}
			need := start + int64(steps) - slots // consumed slot counter needed
			credit := -1
			if need > 0 {
				for cs.credit < cs.endsFrom+len(cs.ends) && cs.ends[cs.credit-cs.endsFrom] < need {
					cs.credit++
				}
				credit = cs.credit
			}
			if k := cs.credit - cs.endsFrom; k >= 64 && 2*k >= len(cs.ends) {
				// No credit names a message before cs.credit again: drop them, so that a
				// connection keeps a few ends, not one a message (9.6 MB, and as much again
				// of lists outgrown, on the 128-node quotient schedule).
				cs.ends = cs.ends[:copy(cs.ends, cs.ends[k:])]
				cs.endsFrom = cs.credit
			}
			st.Send = append(st.Send, Xfer{Conn: int32(id), Peer: int32(peer), Seq: int32(cs.sendSeq), Slot: int32(cs.sendStep % NCCLSteps), Steps: int32(steps), CreditSeq: int32(credit)})
			cs.sendSeq++
			cs.sendStep += steps
			cs.ends = append(cs.ends, int64(cs.sendStep))
		}
		if len(prog.Steps) == cap(prog.Steps) {
			// Doubling (append grows a large slice by a quarter): fewer copies of a long program.
			prog.Steps = append(make([]Step, 0, max(2*cap(prog.Steps), 16)), prog.Steps...)
		}
		prog.Steps = append(prog.Steps, st)
		ps.setLast(c.lane, idx)
		off += st.Bytes
	}
}

// fifos gives the connection from → to (index idx) of channel ch NCCLSteps slots for each of k
// FIFOs: a connection that stands for k of NCCL's, one per head, whose messages take the heads in
// turn (builder.nvlsFifos). Call it after the connection's first emit (its id is then the one it
// had without), and before its NCCLSteps+1-th message.
func (b *builder) fifos(ch, from, to, idx, k int) {
	id := b.conn(ch+b.base, from, to, idx)
	b.cst[id].slots = NCCLSteps * k
}

func (b *builder) finish() *Schedule {
	for i := range b.s.Conns {
		b.s.Conns[i].Messages = b.cst[i].sendSeq
	}
	return b.s
}

// newChunking derives the chunking of one plan (NCCL 2.30.7 calcCollChunking).
func newChunking(p *Plan) *chunking {
	elt := int64(p.DataType.Size())
	buff := p.BuffSize[p.Proto]
	if buff <= 0 {
		buff = DefaultBuffSize[p.Proto]
	}
	chunk := p.ChunkSize
	if chunk == 0 {
		chunk = DefaultChunkSize(p.Func, p.Algo, p.Proto, buff)
	}
	cs, ss := RingChunkSteps(p.Func, p.Algo, p.Proto)
	ck := &chunking{proto: p.Proto, elt: elt, chunkElems: max64(chunk/elt, 1), slicesPerChk: cs / ss,
		stepsPerSlice: ss, stepElems: buff / NCCLSteps / elt, align: max64(16/elt, 1)}
	return ck
}

func (b *builder) addOp(p *Plan) error {
	b.beginOp()
	b.op = len(b.s.Ops)
	b.base = p.ChannelLo
	n := p.NRanks
	elt := int64(p.DataType.Size())
	ck := newChunking(p)
	algo, algoName := p.Algo, p.Algo.String()
	if p.Func == SendRecv || p.Func == AllToAll {
		// No algorithm: what NCCL's rows call P2P (Plan.AlgoName), read back as Ring (Op.UnmarshalJSON).
		algo, algoName = Ring, p.AlgoName()
	}
	op := Op{Func: p.Func, FuncName: p.Func.String(), Algo: algo, AlgoName: algoName, Proto: p.Proto,
		ProtoName: p.Proto.String(), Count: p.Count, DataType: p.DataType, TypeName: p.DataType.String(),
		RedOp: p.Op, OpName: p.Op.String(), Root: p.Root, ChannelLo: p.ChannelLo, NChannels: p.nChannels(), ChunkSize: ck.chunkElems * elt}
	if p.Func == SendRecv && len(p.Transfers) > 0 {
		// A group of transfers: the op reads as rows show it (Plan.Shown: the protocol and
		// channels of its largest transfer), not as the plan's base, which no transfer need use.
		op.Proto, op.NChannels = p.Shown()
		op.ProtoName = op.Proto.String()
	}
	size := p.Count * elt
	switch p.Func {
	case AllReduce, Broadcast, Reduce:
		op.SendBytes, op.RecvBytes = size, size
	case AllGather:
		op.SendBytes, op.RecvBytes, op.InPlaceStride = size, size*int64(n), size
	case ReduceScatter:
		op.SendBytes, op.RecvBytes, op.InPlaceStride = size*int64(n), size, size
	case AllToAll:
		op.SendBytes, op.RecvBytes = size*int64(n), size*int64(n)
	case SendRecv:
		op.SendBytes, op.RecvBytes = sendRecvSizes(p)
	}
	b.s.Ops = append(b.s.Ops, op)
	switch p.Func {
	case SendRecv, AllToAll:
		return b.p2p(p)
	}
	if p.OneRankCopy() {
		// NCCL runs a single-rank collective as a local copy (ncclLaunchOneRank).
		b.emit(&chunking{proto: p.Proto, elt: elt, slicesPerChk: 1, stepsPerSlice: 1}, call{
			prim: Copy, src: &BufRef{Buf: BufSend}, dst: &BufRef{Buf: BufRecv}, nelem: p.Count, postOp: true})
		return nil
	}
	switch p.Algo {
	case Ring:
		return b.ring(p, ck)
	case Tree:
		return b.tree(p, ck)
	case PAT:
		return b.pat(p, ck)
	case NVLS:
		if p.Func != AllReduce {
			return b.nvlsGatherScatter(p, ck)
		}
		if p.NNodes > 1 {
			return b.nvlsCollNet(p, ck)
		}
		return b.nvls(p, ck)
	case NVLSTree:
		return b.nvlsTree(p, ck)
	case CollNetChain:
		return b.collnetChain(p, ck)
	case CollNetDirect:
		return b.collnetDirect(p, ck)
	}
	return fmt.Errorf("%w: algorithm %v", ErrUnsupported, p.Algo)
}

func sendRecvSizes(p *Plan) (send, recv int64) {
	elt := int64(p.DataType.Size())
	if len(p.Transfers) == 0 {
		return p.Count * elt, p.Count * elt
	}
	s := make([]int64, p.NRanks)
	r := make([]int64, p.NRanks)
	for _, t := range p.Transfers {
		s[t.From] += t.Count * elt
		r[t.To] += t.Count * elt
	}
	for i := range s {
		send = max64(send, s[i])
		recv = max64(recv, r[i])
	}
	return send, recv
}

// parts gives each of the call's channels its contiguous range of elements.
func (p *Plan) parts(count int64, align int64) (offs, cnts []int64) {
	if p.Parts == nil {
		return channelParts(count, p.nChannels(), align)
	}
	offs = make([]int64, len(p.Parts))
	cnts = append([]int64(nil), p.Parts...)
	for c := 1; c < len(offs); c++ {
		offs[c] = offs[c-1] + cnts[c-1]
	}
	return offs, cnts
}

// ring is the ring of the call's c-th channel.
func (p *Plan) ring(c int) []int {
	if p.Rings != nil {
		return p.Rings[p.ChannelLo+c]
	}
	r := make([]int, p.NRanks)
	for i := range r {
		r[i] = i
	}
	return r
}

// ring compiles the ring algorithms, following the step structure of NCCL 2.30.7's runRing for each
// collective (paraphrased; chunk sizes from calcCollChunking): per channel, the channel's
// contiguous part is walked in loops of nRanks chunks (AllReduce) or one chunk per rank block
// (AllGather, ReduceScatter) or one chunk (Broadcast, Reduce).
func (b *builder) ring(p *Plan, ck *chunking) error {
	n := p.NRanks
	nch := p.nChannels()
	elt := ck.elt
	offs, cnts := p.parts(p.Count, ck.align)
	for c := 0; c < nch; c++ {
		ring := p.ring(c)
		pos := make([]int, n)
		for i, r := range ring {
			pos[r] = i
		}
		at := func(r, k int) int { return ring[(pos[r]+k)%n] } // k-th rank after r
		part, cnt := offs[c], cnts[c]
		if cnt == 0 {
			continue
		}
		for r := 0; r < n; r++ {
			next, prev := at(r, 1), at(r, n-1)
			bref := func(k BufKind, e int64) *BufRef { return &BufRef{Buf: k, Offset: e * elt} }
			switch p.Func {
			case AllReduce:
				chunkCount := ck.chunkElems
				loopCount := int64(n) * chunkCount
				loop := 0
				for eo := int64(0); eo < cnt; eo += loopCount {
					rem := cnt - eo
					cc := chunkCount
					if rem < loopCount {
						cc = alignUp(divUp(rem, int64(n)), ck.align)
					}
					ringIx := pos[r]
					chunkAt := func(k int) (int64, int64, int) { // chunk index k → offset, nelem
						k = k % n
						co := min64(int64(k)*cc, rem) // empty chunks past the data sit at its end
						return part + eo + co, max64(0, min64(cc, rem-co)), loop*n + k
					}
					o, ne, ci := chunkAt(ringIx + n - 1)
					b.emit(ck, call{rank: r, ch: c, prim: Send, sendTo: []int{next}, src: bref(BufSend, o), nelem: ne, chunk: ci})
					for j := 2; j < n; j++ {
						o, ne, ci = chunkAt(ringIx + n - j)
						b.emit(ck, call{rank: r, ch: c, prim: RecvReduceSend, recvFrom: []int{prev}, sendTo: []int{next}, src: bref(BufSend, o), nelem: ne, chunk: ci})
					}
					o, ne, ci = chunkAt(ringIx)
					b.emit(ck, call{rank: r, ch: c, prim: RecvReduceCopySend, recvFrom: []int{prev}, sendTo: []int{next}, src: bref(BufSend, o), dst: bref(BufRecv, o), nelem: ne, chunk: ci, postOp: true})
					for j := 1; j < n-1; j++ {
						o, ne, ci = chunkAt(ringIx + n - j)
						b.emit(ck, call{rank: r, ch: c, prim: RecvCopySend, recvFrom: []int{prev}, sendTo: []int{next}, dst: bref(BufRecv, o), nelem: ne, chunk: ci})
					}
					o, ne, ci = chunkAt(ringIx + 1)
					b.emit(ck, call{rank: r, ch: c, prim: Recv, recvFrom: []int{prev}, dst: bref(BufRecv, o), nelem: ne, chunk: ci})
					loop++
				}
			case AllGather, ReduceScatter:
				count := p.Count
				ci := 0
				for eo := int64(0); eo < cnt; eo += ck.chunkElems {
					ne := min64(ck.chunkElems, cnt-eo)
					data := part + eo
					blk := func(k int) int64 { return data + int64(at(r, k))*count } // block of the k-th rank after r
					if p.Func == AllGather {
						b.emit(ck, call{rank: r, ch: c, prim: CopySend, sendTo: []int{next}, src: bref(BufSend, data), dst: bref(BufRecv, blk(0)), nelem: ne, chunk: ci})
						for j := 1; j < n-1; j++ {
							b.emit(ck, call{rank: r, ch: c, prim: RecvCopySend, recvFrom: []int{prev}, sendTo: []int{next}, dst: bref(BufRecv, blk(n-j)), nelem: ne, chunk: ci})
						}
						b.emit(ck, call{rank: r, ch: c, prim: Recv, recvFrom: []int{prev}, dst: bref(BufRecv, blk(1)), nelem: ne, chunk: ci})
					} else {
						b.emit(ck, call{rank: r, ch: c, prim: Send, sendTo: []int{next}, src: bref(BufSend, blk(n-1)), nelem: ne, chunk: ci})
						for j := 2; j < n; j++ {
							b.emit(ck, call{rank: r, ch: c, prim: RecvReduceSend, recvFrom: []int{prev}, sendTo: []int{next}, src: bref(BufSend, blk(n-j)), nelem: ne, chunk: ci})
						}
						b.emit(ck, call{rank: r, ch: c, prim: RecvReduceCopy, recvFrom: []int{prev}, src: bref(BufSend, blk(0)), dst: bref(BufRecv, data), nelem: ne, chunk: ci, postOp: true})
					}
					ci++
				}
			case Broadcast, Reduce:
				ci := 0
				for eo := int64(0); eo < cnt; eo += ck.chunkElems {
					ne := min64(ck.chunkElems, cnt-eo)
					o := part + eo
					cl := call{rank: r, ch: c, nelem: ne, chunk: ci}
					if p.Func == Broadcast {
						switch {
						case r == p.Root:
							cl.prim, cl.sendTo, cl.src, cl.dst = CopySend, []int{next}, bref(BufSend, o), bref(BufRecv, o)
						case next == p.Root:
							cl.prim, cl.recvFrom, cl.dst = Recv, []int{prev}, bref(BufRecv, o)
						default:
							cl.prim, cl.recvFrom, cl.sendTo, cl.dst = RecvCopySend, []int{prev}, []int{next}, bref(BufRecv, o)
						}
					} else {
						switch {
						case prev == p.Root:
							cl.prim, cl.sendTo, cl.src = Send, []int{next}, bref(BufSend, o)
						case r == p.Root:
							cl.prim, cl.recvFrom, cl.src, cl.dst, cl.postOp = RecvReduceCopy, []int{prev}, bref(BufSend, o), bref(BufRecv, o), true
						default:
							cl.prim, cl.recvFrom, cl.sendTo, cl.src = RecvReduceSend, []int{prev}, []int{next}, bref(BufSend, o)
						}
					}
					b.emit(ck, cl)
					ci++
				}
			}
		}
	}
	return nil
}

// tree compiles Tree AllReduce as NCCL 2.30.7's runTreeSplit does (paraphrased): the root reduces
// its children's data with its own, writes the result and sends it down in one primitive per chunk;
// every other rank reduces up on lane 0 (leaves send, inner ranks recvReduceSend) while it
// broadcasts down on lane 1 (inner ranks recvCopySend, leaves recv), chunk by chunk, so the two
// phases pipeline.
func (b *builder) tree(p *Plan, ck *chunking) error {
	n := p.NRanks
	nch := p.nChannels()
	trees := p.Trees
	if trees == nil {
		t, err := BuildTrees([][]int{{0}}, n, 1, PatternBalancedTree)
		if err != nil {
			return err
		}
		// Channel c uses tree c%2, as channels and their twins alternate the double binary tree.
		trees = make([]ChannelTree, p.ChannelLo+nch)
		for c := range trees {
			trees[c] = t[c%2]
		}
	}
	elt := ck.elt
	offs, cnts := p.parts(p.Count, ck.align)
	for c := 0; c < nch; c++ {
		t := trees[p.ChannelLo+c]
		part, cnt := offs[c], cnts[c]
		for r := 0; r < n; r++ {
			up, down := t.Up[r], t.Down[r]
			ci := 0
			for eo := int64(0); eo < cnt; eo += ck.chunkElems {
				ne := min64(ck.chunkElems, cnt-eo)
				o := (part + eo) * elt
				src, dst := &BufRef{Buf: BufSend, Offset: o}, &BufRef{Buf: BufRecv, Offset: o}
				switch {
				case up == -1:
					b.emit(ck, call{rank: r, ch: c, prim: RecvReduceCopySend, recvFrom: down, sendTo: down, src: src, dst: dst, nelem: ne, chunk: ci, postOp: true})
				case len(down) == 0:
					b.emit(ck, call{rank: r, ch: c, lane: 0, prim: Send, sendTo: []int{up}, src: src, nelem: ne, chunk: ci})
					b.emit(ck, call{rank: r, ch: c, lane: 1, prim: Recv, recvFrom: []int{up}, dst: dst, nelem: ne, chunk: ci})
				default:
					b.emit(ck, call{rank: r, ch: c, lane: 0, prim: RecvReduceSend, recvFrom: down, sendTo: []int{up}, src: src, nelem: ne, chunk: ci})
					b.emit(ck, call{rank: r, ch: c, lane: 1, prim: RecvCopySend, recvFrom: []int{up}, sendTo: down, dst: dst, nelem: ne, chunk: ci})
				}
				ci++
			}
		}
	}
	return nil
}
