package planner

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/tuning"
)

// Transport buffer memory per rank (NCCL 2.28 src/transport/{p2p,shm,net,nvls}.cc, init.cc).
//
// A connection is one (channel, peer, direction, connIndex) of a rank; connIndex 0 carries
// collectives, 1 send/recv. NCCL reuses a connection that is already set up, so an algorithm
// whose peers coincide with another's on a channel costs nothing more (the dedup below). The
// memory a connection takes depends on its transport:
//
//   - P2P (NVLink or PCIe peer access): the receiver allocates ncclRecvMem plus the LL, LL128 and
//     Simple buffers; with P2P read (sm80 over NVLink) the Simple buffer moves to the sender. Both
//     sides round up to CUDA_IPC_MIN (2 MiB), the cuMem granularity (p2p.cc, NCCL 2.19+).
//   - SHM (same node, no P2P): the buffers are in pinned host memory on the receive side
//     (NCCL_SHM_LOCALITY default).
//   - NET: the sender keeps LL in host memory and LL128/Simple on the GPU when GPUDirect RDMA is
//     usable; the receiver keeps all three on the GPU with GDR, else in host memory. Send/recv
//     over the network (connIndex 1) shares one pool per direction of p2pnChannels ×
//     NCCL_SHARED_STEPS (16) × p2pChunkSize (net.cc sharedNetBuffersInit,
//     NCCL_NET_SHARED_BUFFERS=1); its LL buffers exist only with NCCL_ALLOC_P2P_NET_LL_BUFFERS=1.
//   - NVLS: one unicast buffer bound to the multicast object, nvlsChannels × 2 ×
//     (NCCL_NVLS_CHUNKSIZE × NCCL_STEPS) × nHeads bytes (nvls.cc ncclNvlsBufferSetup).
//   - COLLNET: the head's connection to the CollNet (SHARP) plugin, Simple only (approximate).
//
// Lazy connection (NCCL_RUNTIME_CONNECT=1, the 2.22+ default) connects an algorithm on all its
// channels the first time a call picks it; eager (NCCL_RUNTIME_CONNECT=0) connects at init rings,
// trees, PAT (one rank per node only), NVLS buffers and NVLS trees, and CollNet. Send/recv
// connections are made on first use in both modes, per peer and per p2p channel used.

// Buffer constants of NCCL 2.28 (device.h NCCL_STEPS, net.cc NCCL_SHARED_STEPS, comm.h CUDA_IPC_MIN).
const (
	memSteps       = 8       // NCCL_STEPS
	memSharedSteps = 16      // NCCL_SHARED_STEPS (net.cc, shared p2p buffers over the network)
	cudaIPCMin     = 2 << 20 // CUDA_IPC_MIN, the P2P/cuMem allocation granularity
	hostPage       = 4096
	// memCtrlBytes stands for ncclSendMem / ncclRecvMem (head, tail, FIFO of NCCL_STEPS
	// entries, padding): about a page. Only its rounding matters on the GPU (2 MiB).
	memCtrlBytes = 4096
	// Default NVLS chunk (NCCL_NVLS_CHUNKSIZE, 2.20+: 128 KiB).
	defaultNVLSChunk = 128 << 10
)

// Conn kinds: the transport a connection uses.
const (
	KindP2P     = "P2P"
	KindSHM     = "SHM"
	KindNET     = "NET"
	KindNVLS    = "NVLS"
	KindCollNet = "COLLNET"
)

var memKinds = []string{KindP2P, KindSHM, KindNET, KindNVLS, KindCollNet}

// AlgoSendRecv labels the send/recv (connIndex 1) connections in breakdowns.
const AlgoSendRecv = "SendRecv"

// MemCall is one call of the workload: an nccl-tests size of a collective (for SendRecv each
// rank sends Bytes to the next rank; for AllToAll Bytes is the total buffer).
type MemCall struct {
	Func  coll.Func
	Bytes int64
}

// MemPick is tuning's choice for one call of the workload.
type MemPick struct {
	Coll      string `json:"coll"`
	Bytes     int64  `json:"bytes"`
	Algo      string `json:"algo"`
	Proto     string `json:"proto"`
	NChannels int    `json:"nchannels"`
}

// MemBuffers are the sizes the model used.
type MemBuffers struct {
	// Per connection: NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE, NCCL_BUFFSIZE.
	LL     int64 `json:"ll"`
	LL128  int64 `json:"ll128"`
	Simple int64 `json:"simple"`
	// P2PChunk is comm->p2pChunkSize; P2PChannels p2pnChannels; P2PPerPeer the channels per peer.
	P2PChunk    int64 `json:"p2p_chunk"`
	P2PChannels int   `json:"p2p_channels"`
	P2PPerPeer  int   `json:"p2p_channels_per_peer"`
	// NVLSChunk is NCCL_NVLS_CHUNKSIZE; NVLSChannels comm->nvlsChannels; NVLSHeads the heads (0: no NVLS).
	NVLSChunk    int64 `json:"nvls_chunk,omitempty"`
	NVLSChannels int   `json:"nvls_channels,omitempty"`
	NVLSHeads    int   `json:"nvls_heads,omitempty"`
	// Channels is the collective channel count.
	Channels int `json:"channels"`
}

// KindMem is the connections of one transport kind and their bytes.
type KindMem struct {
	Kind  string `json:"kind"`
	Conns int    `json:"connections"`
	GPU   int64  `json:"gpu_bytes"`
	Host  int64  `json:"host_bytes"`
}

// AlgoProtoMem is the buffer bytes of one protocol in the connections an algorithm created.
type AlgoProtoMem struct {
	Algo  string `json:"algo"`
	Proto string `json:"proto"` // LL, LL128, Simple, or "ctrl" (control structures and rounding)
	Bytes int64  `json:"bytes"`
}

// RankMemory is one rank's transport memory.
type RankMemory struct {
	Rank  int       `json:"rank"`
	Node  int       `json:"node"`
	Conns int       `json:"connections"`
	GPU   int64     `json:"gpu_bytes"`
	Host  int64     `json:"host_bytes"`
	Kinds []KindMem `json:"kinds"`
}

// Stat is min / median / max over ranks.
type Stat struct {
	Min    int64 `json:"min"`
	Median int64 `json:"median"`
	Max    int64 `json:"max"`
}

// MemoryReport is the transport memory of every rank for one mode.
type MemoryReport struct {
	Mode      string     `json:"mode"` // "lazy" or "eager"
	Ranks     int        `json:"ranks"`
	Nodes     int        `json:"nodes"`
	Connected []string   `json:"connected"` // algorithms connected
	Picks     []MemPick  `json:"picks,omitempty"`
	Buffers   MemBuffers `json:"buffers"`
	GPU       Stat       `json:"gpu_bytes"`
	Host      Stat       `json:"host_bytes"`
	// ByAlgoProto and ByKind are of the rank with the most GPU memory (rank MaxRank).
	MaxRank     int            `json:"max_rank"`
	ByAlgoProto []AlgoProtoMem `json:"by_algo_proto"`
	ByKind      []KindMem      `json:"by_kind"`
	PerRank     []RankMemory   `json:"per_rank"`
	Notes       []string       `json:"notes,omitempty"`
}

// alloc is one connection's (or buffer's) memory.
type alloc struct {
	gpu, host int64
	proto     [coll.NumProtos]int64
	ctrl      int64
}

func roundUp(x, to int64) int64 { return (x + to - 1) / to * to }

type connKey struct {
	ch, peer int32
	send     bool
	idx      int8
}

// rconn is one connector of a rank: the channel, the peer, the direction and the connIndex.
type rconn struct {
	ch, peer int32
	send     bool
	idx      int8
}

type memModel struct {
	// conns are, per algorithm (and AlgoSendRecv), every rank's connectors as coll lays them out
	// for the communicator's plans (coll.Connections).
	conns map[string][][]rconn
	p     *Planner
	t     *tuning.Table
	nvls  *search.Graph // nil: no NVLS
	// the CollNet graphs (nil: no CollNet)
	collNetChain, collNetDirect *search.Graph
	buf                         [coll.NumProtos]int64
	G, n                        int
	nch                         int
	p2p                         struct{ total, perPeer int }
	chunk                       int64
}

// Memory computes every rank's transport buffers for the workload calls: lazy (eager false)
// connects the algorithms NCCL picks for them, eager everything NCCL_RUNTIME_CONNECT=0 connects
// at init. Send/recv connections come from the workload's SendRecv and AllToAll calls in both
// modes.
func (p *Planner) Memory(calls []MemCall, dt coll.DataType, eager bool) (*MemoryReport, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("planner: memory: unknown data type %v", dt)
	}
	mm := &memModel{p: p, t: p.Table, G: p.PPN, n: p.NRanks(), nch: len(p.Rings)}
	found := func(g *search.Graph) *search.Graph {
		if g != nil && g.NChannels > 0 {
			return g
		}
		return nil
	}
	mm.nvls = found(p.Search.NVLS)
	if p.Settings.CollNet {
		mm.collNetChain, mm.collNetDirect = found(p.Search.CollNetChain), found(p.Search.CollNetDirect)
	}
	cfg := &p.Table.Config
	mm.buf = [coll.NumProtos]int64{coll.LL: 524288, coll.LL128: 4915200, coll.Simple: 4 << 20} // NCCL 2.28 default buffer sizes
	if cfg.LLBuffSize > 0 {
		mm.buf[coll.LL] = cfg.LLBuffSize
	}
	if cfg.LL128BuffSize > 0 {
		mm.buf[coll.LL128] = cfg.LL128BuffSize
	}
	if cfg.BuffSize > 0 {
		mm.buf[coll.Simple] = cfg.BuffSize
	}
	mm.p2p.total, mm.p2p.perPeer = p.Table.P2PChannels()
	mm.chunk = p.Table.P2PChunkSize()
	rep := &MemoryReport{Mode: "lazy", Ranks: mm.n, Nodes: p.Nodes}
	if eager {
		rep.Mode = "eager"
	}
	nvlsChunk := int64(defaultNVLSChunk)
	if cfg.NVLSChunkSize > 0 {
		nvlsChunk = cfg.NVLSChunkSize
	}
	rep.Buffers = MemBuffers{LL: mm.buf[coll.LL], LL128: mm.buf[coll.LL128], Simple: mm.buf[coll.Simple],
		P2PChunk: mm.chunk, P2PChannels: mm.p2p.total, P2PPerPeer: mm.p2p.perPeer, Channels: mm.nch}
	if mm.nvls != nil {
		rep.Buffers.NVLSChunk, rep.Buffers.NVLSChannels, rep.Buffers.NVLSHeads = nvlsChunk, p.Table.NVLSChannels, mm.nvls.NChannels
	}

	// Which algorithms are connected, and the send/recv peers.
	algos := map[coll.Algo]bool{}
	// Send/recv peers by offset (peer = r+off): channels per direction, [0] for a peer in the
	// node, [1] for one across the network.
	p2pSend, p2pRecv := map[int][2]int{}, map[int][2]int{}
	elt := dt.Size()
	for _, c := range calls {
		if c.Bytes < 0 {
			return nil, fmt.Errorf("planner: memory: %s of %d bytes", coll.TestName(c.Func), c.Bytes)
		}
		switch c.Func {
		case coll.SendRecv, coll.AllToAll:
			if err := mm.p2pCall(c, rep, p2pSend, p2pRecv); err != nil {
				return nil, err
			}
			continue
		}
		count, _ := coll.TestCount(c.Func, c.Bytes, elt, mm.n)
		if count == 0 || mm.n == 1 {
			continue
		}
		ch, err := p.Table.Select(tuning.Call{Func: c.Func, Count: count, ElemSize: elt, DataType: int(dt)})
		if err != nil {
			return nil, fmt.Errorf("planner: memory: %s %d bytes: %w", coll.TestName(c.Func), c.Bytes, err)
		}
		algo, proto, nch := ch.Shown()
		rep.Picks = append(rep.Picks, MemPick{Coll: coll.TestName(c.Func), Bytes: c.Bytes, Algo: algo, Proto: proto, NChannels: nch})
		if !eager {
			algos[ch.Algo] = true
		}
	}
	if eager && mm.n > 1 {
		algos[coll.Ring], algos[coll.Tree] = true, true
		if mm.n == p.Nodes && p.Table.Enabled(coll.AllGather, coll.PAT, coll.Simple) {
			algos[coll.PAT] = true
		}
		if mm.nvls != nil {
			algos[coll.NVLS] = true
			if p.Nodes > 1 {
				algos[coll.NVLSTree] = true
			}
		}
		if mm.collNetChain != nil {
			algos[coll.CollNetChain] = true
		}
		if mm.collNetDirect != nil {
			algos[coll.CollNetDirect] = true
		}
	}
	for a := coll.Algo(0); a < coll.NumAlgos; a++ {
		if algos[a] {
			rep.Connected = append(rep.Connected, a.String())
		}
	}
	if err := mm.connect(algos); err != nil {
		return nil, err
	}
	if len(p2pSend)+len(p2pRecv) > 0 {
		rep.Connected = append(rep.Connected, AlgoSendRecv)
	}

	// Per rank.
	var best *rankAcc
	for r := 0; r < mm.n; r++ {
		acc := mm.rank(r, algos, p2pSend, p2pRecv)
		rm := RankMemory{Rank: r, Node: r / mm.G, Conns: acc.conns}
		for _, k := range memKinds {
			km := acc.kinds[k]
			if km.Conns == 0 && km.GPU == 0 && km.Host == 0 {
				continue
			}
			rm.Kinds = append(rm.Kinds, km)
			rm.GPU += km.GPU
			rm.Host += km.Host
		}
		rep.PerRank = append(rep.PerRank, rm)
		if best == nil || rm.GPU > best.gpu {
			acc.gpu = rm.GPU
			best = acc
			rep.MaxRank = r
		}
	}
	rep.GPU = stat(rep.PerRank, func(r RankMemory) int64 { return r.GPU })
	rep.Host = stat(rep.PerRank, func(r RankMemory) int64 { return r.Host })
	if best != nil {
		for _, a := range best.algoOrder {
			ap := best.byAlgo[a]
			for p := coll.Proto(0); p < coll.NumProtos; p++ {
				if ap.proto[p] > 0 {
					rep.ByAlgoProto = append(rep.ByAlgoProto, AlgoProtoMem{Algo: a, Proto: p.String(), Bytes: ap.proto[p]})
				}
			}
			if ap.ctrl > 0 {
				rep.ByAlgoProto = append(rep.ByAlgoProto, AlgoProtoMem{Algo: a, Proto: "ctrl", Bytes: ap.ctrl})
			}
		}
		for _, k := range memKinds {
			if km := best.kinds[k]; km.Conns > 0 || km.GPU > 0 || km.Host > 0 {
				rep.ByKind = append(rep.ByKind, km)
			}
		}
	}
	if len(p2pSend)+len(p2pRecv) > 0 && p.Nodes > 1 {
		rep.Notes = append(rep.Notes, "send/recv over the network uses one shared pool per direction (NCCL_NET_SHARED_BUFFERS=1)")
	}
	if algos[coll.CollNetChain] || algos[coll.CollNetDirect] {
		rep.Notes = append(rep.Notes, "CollNet is approximate, an upper bound: every rank connects to every head of its node both ways on connIndex 0 and 1 (direct) or to its chain neighbours, and each head holds Simple buffers to the CollNet plugin per channel")
	}
	if algos[coll.NVLSTree] && p.Nodes > 1 {
		rep.Notes = append(rep.Notes, "NVLS trees: on NVLS channel c the node's head c mod nHeads joins the same head of its double-binary-tree parent and children nodes (approximation of ncclNvlsTreeConnect)")
	}
	if eager {
		rep.Notes = append(rep.Notes, "eager: NCCL_RUNTIME_CONNECT=0; send/recv peers are still connected on first use; NVB preconnect (NCCL_NVB_PRECONNECT) and PXN proxies not counted")
	}
	rep.Notes = append(rep.Notes, "GPU allocations rounded to 2 MiB (cuMem granularity), control structures taken as one page")
	return rep, nil
}

func stat(rs []RankMemory, f func(RankMemory) int64) Stat {
	if len(rs) == 0 {
		return Stat{}
	}
	v := make([]int64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return Stat{Min: v[0], Median: v[len(v)/2], Max: v[len(v)-1]}
}

// p2pCall records the send/recv peers and channels of one SendRecv or AllToAll call.
func (mm *memModel) p2pCall(c MemCall, rep *MemoryReport, send, recv map[int][2]int) error {
	if mm.n == 1 {
		return nil
	}
	var offs []int
	per := c.Bytes
	if c.Func == coll.SendRecv {
		offs = []int{1}
	} else {
		per = c.Bytes / int64(mm.n)
		for o := 1; o < mm.n; o++ {
			offs = append(offs, o)
		}
	}
	for _, o := range offs {
		for k, kind := range []tuning.PeerKind{tuning.PeerIntra, tuning.PeerNet} {
			ch, err := mm.p.P2P(per, kind, coll.Exclude{})
			if err != nil {
				return err
			}
			nc := max(ch.NChannels, 1)
			s, r := send[o], recv[mm.n-o]
			s[k], r[k] = max(s[k], nc), max(r[k], nc)
			send[o], recv[mm.n-o] = s, r
			if o == 1 && (k == 1) == (mm.G == 1) {
				rep.Picks = append(rep.Picks, MemPick{Coll: coll.TestName(c.Func), Bytes: c.Bytes, Algo: "P2P", Proto: ch.Proto.String(), NChannels: nc})
			}
		}
	}
	return nil
}

type rankAcc struct {
	conns     int
	gpu       int64
	kinds     map[string]KindMem
	byAlgo    map[string]*alloc
	algoOrder []string
}

func (a *rankAcc) add(algo, kind string, al alloc, conn bool) {
	km := a.kinds[kind]
	km.Kind = kind
	if conn {
		km.Conns++
		a.conns++
	}
	km.GPU += al.gpu
	km.Host += al.host
	a.kinds[kind] = km
	ap := a.byAlgo[algo]
	if ap == nil {
		ap = &alloc{}
		a.byAlgo[algo] = ap
		a.algoOrder = append(a.algoOrder, algo)
	}
	for p := range al.proto {
		ap.proto[p] += al.proto[p]
	}
	ap.ctrl += al.ctrl
	ap.gpu += al.gpu
	ap.host += al.host
}

// kindOf is the transport between rank r and peer.
func (mm *memModel) kindOf(r, peer int) string {
	if r/mm.G != peer/mm.G {
		return KindNET
	}
	if !mm.p.Transports.P2P[r%mm.G][peer%mm.G] {
		return KindSHM
	}
	return KindP2P
}

func (mm *memModel) gdr(r int) bool { return mm.p.Transports.GDR[r%mm.G] }

// connAlloc is the memory one connector of rank r to peer takes on rank r.
func (mm *memModel) connAlloc(kind string, r, peer int, send bool, idx int) alloc {
	var a alloc
	ll, ll128, simple := mm.buf[coll.LL], mm.buf[coll.LL128], mm.buf[coll.Simple]
	switch kind {
	case KindP2P:
		read := mm.p.Transports.Read[r%mm.G][peer%mm.G]
		raw := int64(memCtrlBytes)
		if send {
			if read {
				raw += simple
				a.proto[coll.Simple] = simple
			}
		} else {
			raw += ll + ll128
			a.proto[coll.LL], a.proto[coll.LL128] = ll, ll128
			if !read {
				raw += simple
				a.proto[coll.Simple] = simple
			}
		}
		a.gpu = roundUp(raw, cudaIPCMin)
		a.ctrl = a.gpu - (raw - memCtrlBytes)
	case KindSHM:
		raw := int64(memCtrlBytes)
		if !send {
			raw += ll + ll128 + simple
			a.proto = [coll.NumProtos]int64{coll.LL: ll, coll.LL128: ll128, coll.Simple: simple}
		}
		a.host = roundUp(raw, hostPage)
		a.ctrl = a.host - (raw - memCtrlBytes)
	case KindNET:
		if idx == 1 {
			// Shared pool (counted once per direction by the caller); LL only on request.
			a.host = memCtrlBytes
			a.ctrl = memCtrlBytes
			if mm.t.Config.AllocP2PNetLLBuffers {
				a.host += ll
				a.proto[coll.LL] = ll
			}
			return a
		}
		a.proto = [coll.NumProtos]int64{coll.LL: ll, coll.LL128: ll128, coll.Simple: simple}
		switch {
		case !mm.gdr(r):
			a.host = roundUp(memCtrlBytes+ll+ll128+simple, hostPage)
		case send:
			a.host = roundUp(memCtrlBytes+ll, hostPage)
			a.gpu = roundUp(ll128+simple, cudaIPCMin)
		default:
			a.host = memCtrlBytes
			a.gpu = roundUp(ll+ll128+simple, cudaIPCMin)
		}
		a.ctrl = a.gpu + a.host - ll - ll128 - simple
	case KindCollNet:
		a.proto[coll.Simple] = simple
		if mm.gdr(r) {
			a.gpu, a.host = roundUp(simple, cudaIPCMin), memCtrlBytes
		} else {
			a.host = roundUp(memCtrlBytes+simple, hostPage)
		}
		a.ctrl = a.gpu + a.host - simple
	}
	return a
}

// connect lays out the connections of the connected algorithms with coll.Connections: rings and
// trees on every channel of the communicator, PAT's binomial peers for both AllGather and
// ReduceScatter.
func (mm *memModel) connect(algos map[coll.Algo]bool) error {
	p := mm.p
	mm.conns = map[string][][]rconn{}
	base := coll.Plan{Func: coll.AllReduce, Proto: coll.Simple, NRanks: mm.n, NNodes: p.Nodes, NChannels: mm.nch,
		DataType: coll.Float32, Rings: p.Rings, Trees: p.Trees}
	var plans []struct {
		name string
		plan coll.Plan
	}
	add := func(name string, q coll.Plan) {
		plans = append(plans, struct {
			name string
			plan coll.Plan
		}{name, q})
	}
	if algos[coll.Ring] {
		q := base
		q.Algo = coll.Ring
		add("Ring", q)
	}
	if algos[coll.Tree] {
		q := base
		q.Algo = coll.Tree
		add("Tree", q)
	}
	if algos[coll.PAT] {
		for _, f := range []coll.Func{coll.ReduceScatter, coll.AllGather} {
			q := base
			q.Func, q.Algo, q.Rings, q.Trees = f, coll.PAT, nil, nil
			add("PAT", q)
		}
	}
	for _, pl := range plans {
		cs, err := coll.Connections(&pl.plan)
		if err != nil {
			return fmt.Errorf("planner: memory: %s connections: %w", pl.name, err)
		}
		per := mm.conns[pl.name]
		if per == nil {
			per = make([][]rconn, mm.n)
			mm.conns[pl.name] = per
		}
		for _, c := range cs {
			if c.From < mm.n {
				per[c.From] = append(per[c.From], rconn{ch: int32(c.Channel), peer: int32(c.To), send: true, idx: int8(c.ConnIndex)})
			}
			if c.To < mm.n {
				per[c.To] = append(per[c.To], rconn{ch: int32(c.Channel), peer: int32(c.From), send: false, idx: int8(c.ConnIndex)})
			}
		}
	}
	return nil
}

// rankConns are rank r's connectors of one algorithm (none when it is not connected).
func (mm *memModel) rankConns(name string, r int) []rconn {
	if per := mm.conns[name]; per != nil {
		return per[r]
	}
	return nil
}

// rank lists rank r's connections algorithm by algorithm (in NCCL's algorithm order, so a
// connection shared by two algorithms is charged to the first) and adds up their memory.
func (mm *memModel) rank(r int, algos map[coll.Algo]bool, p2pSend, p2pRecv map[int][2]int) *rankAcc {
	acc := &rankAcc{kinds: map[string]KindMem{}, byAlgo: map[string]*alloc{}}
	seen := map[connKey]bool{}
	n := mm.n
	conn := func(algo string, ch, peer int, send bool, idx int) {
		if peer < 0 || peer == r || peer >= n {
			return
		}
		k := connKey{int32(ch), int32(peer), send, int8(idx)}
		if seen[k] {
			return
		}
		seen[k] = true
		kind := mm.kindOf(r, peer)
		acc.add(algo, kind, mm.connAlloc(kind, r, peer, send, idx), true)
	}
	both := func(algo string, ch, peer int) {
		conn(algo, ch, peer, false, 0)
		conn(algo, ch, peer, true, 0)
	}
	node, local := r/mm.G, r%mm.G
	// Ring, then Tree, then PAT, NVLS, NVLSTree, CollNet, in the order of ncclCollPreconnect.
	for _, name := range []string{"Ring", "Tree", "PAT"} {
		for _, c := range mm.rankConns(name, r) {
			conn(name, int(c.ch), int(c.peer), c.send, int(c.idx))
		}
	}
	nvls := mm.nvls
	if nvls != nil && (algos[coll.NVLS] || algos[coll.NVLSTree]) {
		name := "NVLS"
		if !algos[coll.NVLS] {
			name = "NVLSTree"
		}
		size := int64(mm.t.NVLSChannels) * 2 * mm.nvlsChunk() * memSteps * int64(nvls.NChannels)
		a := alloc{gpu: roundUp(size, cudaIPCMin)}
		a.proto[coll.Simple] = size
		a.ctrl = a.gpu - size
		acc.add(name, KindNVLS, a, false)
	}
	if nvls != nil && algos[coll.NVLSTree] && mm.p.Nodes > 1 {
		// NVLS trees (ncclNvlsTreeConnect): on NVLS channel c the node's head of c joins the same
		// head of its double-binary-tree parent and children nodes, both directions.
		for c := 0; c < mm.t.NVLSChannels; c++ {
			h := c % nvls.NChannels
			if len(nvls.Intra) <= h || len(nvls.Intra[h]) == 0 || nvls.Intra[h][0] != local {
				continue
			}
			up, d0, d1, _ := coll.Dtree(mm.p.Nodes, node, c%2)
			for _, nd := range []int{up, d0, d1} {
				if nd >= 0 {
					both("NVLSTree", c, nd*mm.G+local)
				}
			}
		}
	}
	if g := mm.collNetChain; g != nil && algos[coll.CollNetChain] {
		for c := 0; c < mm.nch; c++ {
			chain := g.Intra[c%len(g.Intra)]
			for i, x := range chain {
				if x != local {
					continue
				}
				if i > 0 {
					both("CollNetChain", c, node*mm.G+chain[i-1])
				}
				if i+1 < len(chain) {
					both("CollNetChain", c, node*mm.G+chain[i+1])
				}
				if i == 0 {
					acc.add("CollNetChain", KindCollNet, mm.connAlloc(KindCollNet, r, r, false, 0), true)
					acc.add("CollNetChain", KindCollNet, mm.connAlloc(KindCollNet, r, r, true, 0), true)
				}
			}
		}
	}
	if g := mm.collNetDirect; g != nil && algos[coll.CollNetDirect] {
		heads := map[int]bool{}
		for _, ch := range g.Intra {
			if len(ch) > 0 {
				heads[ch[0]] = true
			}
		}
		for c := 0; c < mm.nch; c++ {
			for h := range heads {
				// Scatter-reduce on connIndex 1, broadcast-gather on connIndex 0 (p2p.cc).
				for idx := 0; idx < 2; idx++ {
					conn("CollNetDirect", c, node*mm.G+h, false, idx)
					conn("CollNetDirect", c, node*mm.G+h, true, idx)
				}
			}
			if heads[local] {
				acc.add("CollNetDirect", KindCollNet, mm.connAlloc(KindCollNet, r, r, false, 0), true)
				acc.add("CollNetDirect", KindCollNet, mm.connAlloc(KindCollNet, r, r, true, 0), true)
			}
		}
	}
	// Send/recv (connIndex 1): channels per peer as tuning's p2p rule splits the workload's sizes.
	netPool := [2]bool{}
	// Send/recv (connIndex 1): a peer is connected on the channels coll puts a transfer to it on
	// (coll.P2PChannels), as many as tuning's per-peer plan gives the workload's largest transfer
	// to a peer in the node (need[0]) or across the network (need[1]).
	p2p := func(peer int, need [2]int, send bool) {
		nc := need[0]
		if mm.kindOf(r, peer) == KindNET {
			nc = need[1]
		}
		dist := ((peer-r)%n + n) % n
		if !send {
			dist = n - dist
		}
		for _, c := range coll.P2PChannels(dist, mm.p2p.total, nc) {
			conn(AlgoSendRecv, c, peer, send, 1)
		}
		if mm.kindOf(r, peer) == KindNET {
			d := 0
			if send {
				d = 1
			}
			if !netPool[d] {
				netPool[d] = true
				size := int64(mm.p2p.total) * memSharedSteps * mm.chunk
				a := alloc{}
				a.proto[coll.Simple] = size
				if mm.gdr(r) {
					a.gpu = roundUp(size, cudaIPCMin)
				} else {
					a.host = roundUp(size, hostPage)
				}
				a.ctrl = a.gpu + a.host - size
				acc.add(AlgoSendRecv, KindNET, a, false)
			}
		}
	}
	for _, o := range sortedKeys(p2pSend) {
		p2p((r+o)%n, p2pSend[o], true)
	}
	for _, o := range sortedKeys(p2pRecv) {
		p2p((r+o)%n, p2pRecv[o], false)
	}
	return acc
}

func (mm *memModel) nvlsChunk() int64 {
	if c := mm.t.Config.NVLSChunkSize; c > 0 {
		return c
	}
	return defaultNVLSChunk
}

func sortedKeys(m map[int][2]int) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// WriteMemoryText prints rep as tables: the summary over ranks, the breakdown of the rank with
// the most GPU memory per algorithm × protocol and per connection type, and, with perRank, one
// line per rank. other (may be nil) is the same workload in the other mode, summarised in one line.
func WriteMemoryText(w io.Writer, rep, other *MemoryReport, perRank bool) error {
	var b strings.Builder
	mode := map[string]string{"lazy": "lazy (NCCL_RUNTIME_CONNECT=1, the default)", "eager": "eager (NCCL_RUNTIME_CONNECT=0)"}
	fmt.Fprintf(&b, "# transport buffers per rank, %s: %d ranks on %d node(s)\n", mode[rep.Mode], rep.Ranks, rep.Nodes)
	bf := rep.Buffers
	fmt.Fprintf(&b, "# per connection: LL %d B, LL128 %d B, Simple %d B; %d channels; p2p: %d channels (%d per peer), chunk %d B",
		bf.LL, bf.LL128, bf.Simple, bf.Channels, bf.P2PChannels, bf.P2PPerPeer, bf.P2PChunk)
	if bf.NVLSHeads > 0 {
		fmt.Fprintf(&b, "; NVLS: %d channels x %d heads, chunk %d B", bf.NVLSChannels, bf.NVLSHeads, bf.NVLSChunk)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "# connected: %s\n", strings.Join(append([]string{}, rep.Connected...), " "))
	for _, g := range groupPicks(rep.Picks) {
		fmt.Fprintf(&b, "#   %s\n", g)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%-10s %10s %10s %10s\n", "MiB/rank", "min", "median", "max")
	fmt.Fprintf(&b, "%-10s %10s %10s %10s\n", "GPU", mib(rep.GPU.Min), mib(rep.GPU.Median), mib(rep.GPU.Max))
	fmt.Fprintf(&b, "%-10s %10s %10s %10s\n", "host", mib(rep.Host.Min), mib(rep.Host.Median), mib(rep.Host.Max))
	if len(rep.PerRank) > 0 {
		fmt.Fprintf(&b, "\nrank %d (most GPU memory) by algorithm and protocol:\n", rep.MaxRank)
		fmt.Fprintf(&b, "%-14s %-7s %10s\n", "algorithm", "proto", "MiB")
		for _, ap := range rep.ByAlgoProto {
			fmt.Fprintf(&b, "%-14s %-7s %10s\n", ap.Algo, ap.Proto, mib(ap.Bytes))
		}
		fmt.Fprintf(&b, "\nrank %d by connection type:\n", rep.MaxRank)
		fmt.Fprintf(&b, "%-8s %6s %10s %10s\n", "type", "conns", "GPU MiB", "host MiB")
		for _, k := range rep.ByKind {
			fmt.Fprintf(&b, "%-8s %6d %10s %10s\n", k.Kind, k.Conns, mib(k.GPU), mib(k.Host))
		}
	}
	if perRank {
		fmt.Fprintf(&b, "\n%6s %5s %6s", "rank", "node", "conns")
		for _, k := range memKinds {
			fmt.Fprintf(&b, " %7s", k)
		}
		fmt.Fprintf(&b, " %10s %10s\n", "GPU MiB", "host MiB")
		for _, r := range rep.PerRank {
			fmt.Fprintf(&b, "%6d %5d %6d", r.Rank, r.Node, r.Conns)
			for _, k := range memKinds {
				n := 0
				for _, km := range r.Kinds {
					if km.Kind == k {
						n = km.Conns
					}
				}
				fmt.Fprintf(&b, " %7d", n)
			}
			fmt.Fprintf(&b, " %10s %10s\n", mib(r.GPU), mib(r.Host))
		}
	}
	if other != nil {
		fmt.Fprintf(&b, "\n%s: median %s MiB GPU, %s MiB host per rank (max %s MiB GPU), connecting %s\n",
			mode[other.Mode], mib(other.GPU.Median), mib(other.Host.Median), mib(other.GPU.Max), strings.Join(other.Connected, " "))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "# note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// groupPicks folds consecutive picks of one collective with the same choice into size ranges.
func groupPicks(ps []MemPick) []string {
	var out []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1].Coll == ps[i].Coll && ps[j+1].Algo == ps[i].Algo && ps[j+1].Proto == ps[i].Proto {
			j++
		}
		rng := fmt.Sprintf("%d B", ps[i].Bytes)
		if j > i {
			rng = fmt.Sprintf("%d..%d B", ps[i].Bytes, ps[j].Bytes)
		}
		out = append(out, fmt.Sprintf("%s %s: %s/%s", ps[i].Coll, rng, ps[i].Algo, ps[i].Proto))
		i = j + 1
	}
	return out
}
