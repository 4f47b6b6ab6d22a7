package coll

import "fmt"

// ChannelTree is one channel's tree: for every rank its parent (Up, −1 at the root) and its children
// (Down, at most NCCL_MAX_TREE_ARITY = 3, NCCL 2.30.7 device.h).
type ChannelTree struct {
	Up   []int   `json:"up"`
	Down [][]int `json:"down"`
	// Loose (Plan.NodeTrees only): per node, children of Down whose messages up the node receives
	// on a lane of their own instead of reducing them with the others: it consumes them without
	// waiting for them. simnet's node fold uses it for child classes its representative does not
	// have. nil: none.
	Loose [][]int `json:"loose,omitempty"`
}

// Transfer is one point-to-point message of a SendRecv operation: From sends Count elements to To.
// The optional fields carry tuning's per-peer choice (NCCL 2.28 addP2pToPlan, tuning.Table.P2P): the
// channels this direction is split over, its chunk size and protocol; zero values take the plan's.
type Transfer struct {
	From      int   `json:"from"`
	To        int   `json:"to"`
	Count     int64 `json:"count"`
	NChannels int   `json:"nchannels,omitempty"` // at most the plan's NChannels
	ChunkSize int64 `json:"chunk_size,omitempty"`
	LL        bool  `json:"ll,omitempty"` // LL instead of the plan's protocol
}

// Plan is the input of Compile: one collective with the choices tuning made for it and the channel
// topology search built.
type Plan struct {
	Func Func
	// Count is in elements as NCCL's API takes it: AllReduce/Broadcast/Reduce the buffer, AllGather the
	// per-rank send count, ReduceScatter the per-rank receive count, AllToAll the count per peer,
	// SendRecv the count each rank sends (unless Transfers is set).
	Count    int64
	DataType DataType
	Op       RedOp
	Root     int // Broadcast, Reduce
	// Peer (SendRecv without Transfers): rank r sends to r+Peer and receives from r−Peer (mod n);
	// 0 means 1, the nccl-tests sendrecv pattern.
	Peer      int
	Transfers []Transfer // SendRecv: explicit list of messages (overrides Count/Peer)
	NRanks    int
	// NNodes splits the ranks into nodes of NRanks/NNodes consecutive ranks (0 means 1 node). Only
	// CollNetChain and NVLS read it; rings and trees already encode the node structure.
	NNodes    int
	Algo      Algo
	Proto     Proto
	NChannels int
	// ChannelLo is the first channel the call uses (NCCL's channel{Lo..Hi}); channels
	// ChannelLo..ChannelLo+NChannels−1 of the communicator carry it. Rings and Trees are indexed by
	// the communicator's channel number.
	ChannelLo int
	// Parts optionally gives each of the call's channels its element count (NCCL's countLo, countMid…,
	// countHi from scheduleCollTasksToPlan); they must sum to Count. nil splits Count evenly.
	Parts []int64
	// P2PChannels (SendRecv, AllToAll) is the communicator's point-to-point channel count
	// (NCCL's p2pnChannels, a power of two); NChannels is then the channels each transfer is
	// split over. 0 means NChannels.
	P2PChannels int
	NThreads    int // informational (tuning's thread count); the schedule does not depend on it
	// ChunkSize is the payload bytes per chunk, the final value of tuning's calcCollChunking
	// (stepSize×chunkSteps, then LL ×1/2 or LL128 ×15/16, adjustments, rounded down to the protocol
	// grain); 0 derives it from the protocol defaults. SendRecv: the P2P chunk
	// (p2pChunkSize), 0 = 128 KiB.
	ChunkSize int64
	// BuffSize per protocol (LL, LL128, Simple) in bytes; 0 means NCCL's default (DefaultBuffSize).
	BuffSize [NumProtos]int64
	// Rings: per channel the ring order over all ranks (Rings[c][i+1] follows Rings[c][i]); nil means
	// the identity ring 0,1,…,n−1 on every channel.
	Rings [][]int
	// Trees: per channel the tree links; nil means BuildTrees over one rank per node.
	Trees []ChannelTree
	// NodeTrees (NVLSTree): per channel of the communicator the tree of its NVLS heads over the
	// nodes (Up and Down indexed by node; a node may have any number of children); nil means
	// NCCL's double binary tree (Dtree, the channel's parity picking the tree). simnet's node
	// fold compiles a quotient of the nodes with it.
	NodeTrees []ChannelTree
	// CollNetHeads (CollNetDirect): the local ranks of every node that talk to the network, each
	// beside its own NIC (NCCL 2.28: the distinct intra[0] of the CollNet direct graph's
	// channels); nil means every local rank.
	CollNetHeads []int
	// NVLSHeads (NVLS, NVLSTree): the local ranks that are NCCL's NVLS heads, in head order
	// (NCCL 2.28 connectNvls: nHeads is the NVLS graph's channel count, min(32, GPUs of the node)
	// by its search, and head h is the first GPU of that graph's channel h). Each loop of a
	// channel covers one chunk per head: the switch reduces chunk h for head h, which alone
	// passes it on (back to the switch, or into the tree of heads h across nodes); every rank
	// still scatters and gathers every chunk. nil means every local rank, in order (the same on
	// nodes of up to 32 GPUs, where every GPU heads a channel of the graph).
	NVLSHeads []int
}

// NVLSHeadCount is len(p.NVLSHeadRanks()), without making the list.
func (p *Plan) NVLSHeadCount() int {
	if len(p.NVLSHeads) > 0 {
		return len(p.NVLSHeads)
	}
	return p.NRanks / max(p.NNodes, 1)
}

// NVLSHeadRanks returns the plan's NVLS heads (local ranks, in head order): NVLSHeads, or every
// local rank of a node in order.
func (p *Plan) NVLSHeadRanks() []int {
	if len(p.NVLSHeads) > 0 {
		return p.NVLSHeads
	}
	ppn := p.NRanks / max(p.NNodes, 1)
	heads := make([]int, ppn)
	for j := range heads {
		heads[j] = j
	}
	return heads
}

// Shown is the protocol and channel count a plan's row shows: for a send/recv plan with
// transfers, those of its largest transfer (each transfer has its own; the plan's channels are
// the p2p channels they share); otherwise the plan's.
func (p *Plan) Shown() (Proto, int) {
	if p.Func != SendRecv || len(p.Transfers) == 0 {
		return p.Proto, p.NChannels
	}
	best := p.Transfers[0]
	for _, t := range p.Transfers[1:] {
		if t.Count > best.Count {
			best = t
		}
	}
	proto, nch := p.Proto, best.NChannels
	if best.LL {
		proto = LL
	}
	if nch == 0 {
		nch = p.NChannels
	}
	return proto, nch
}

// AlgoName is the algorithm a row shows: "P2P" for point-to-point plans, which follow none, and
// OneRankAlgo for a one-rank collective (OneRankCopy).
func (p *Plan) AlgoName() string {
	if p.Func == SendRecv || p.Func == AllToAll {
		return "P2P"
	}
	if p.OneRankCopy() {
		return OneRankAlgo
	}
	return p.Algo.String()
}

// OneRankAlgo and OneRankProto are what rows show for a one-rank collective: NCCL 2.28 runs it as
// a device-to-device copy (ncclLaunchOneRank), with no algorithm, protocol or channel, and prints
// no tuning table or choice for such a communicator (testdata/nccl/h200x1/onerank-tuning-*).
const (
	OneRankAlgo  = "Memcpy"
	OneRankProto = "none"
)

// OneRankCopy reports whether p is a collective of a one-rank communicator, which NCCL runs as a
// copy of the buffer (its plan here is the copy compiled as a schedule).
func (p *Plan) OneRankCopy() bool {
	return p.NRanks == 1 && p.Func != SendRecv && p.Func != AllToAll
}

// ShownNames is the algorithm, protocol and channel count a plan's row shows, as words: AlgoName
// and Shown, and for a one-rank collective OneRankAlgo, OneRankProto and no channel.
func (p *Plan) ShownNames() (algo, proto string, nch int) {
	if p.OneRankCopy() {
		return OneRankAlgo, OneRankProto, 0
	}
	pr, n := p.Shown()
	return p.AlgoName(), pr.String(), n
}

// Decision is "Algo/Proto/channels" as rows show a plan ("Ring/Simple/24", "P2P/LL/2",
// "Memcpy/none/0").
func (p *Plan) Decision() string {
	algo, proto, nch := p.ShownNames()
	return fmt.Sprintf("%s/%s/%d", algo, proto, nch)
}
