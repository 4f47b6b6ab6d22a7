package planner

import (
	"fmt"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
)

// Decision is NCCL's decision for one call: the plan to compile, and how the tuning model reached
// it.
type Decision struct {
	Plan coll.Plan
	// Choice is the tuning model's choice line and cost table (collectives; nil for SendRecv and
	// AllToAll).
	Choice *tuning.Choice
	// P2P is the point-to-point choice of one transfer (SendRecv and AllToAll; nil otherwise).
	P2P *tuning.P2PChoice
}

// Plan returns what NCCL runs for c (coll.Planner).
func (p *Planner) Plan(c coll.Call) (coll.Plan, error) {
	d, err := p.Decide(c)
	return d.Plan, err
}

// PlanTimed is Plan with the tuning model's time for the plan (µs; 0 for SendRecv and AllToAll,
// which NCCL plans without a cost table): simnet.Machine.Alternatives reports it beside each cell.
func (p *Planner) PlanTimed(c coll.Call) (coll.Plan, float64, error) {
	d, err := p.Decide(c)
	if err != nil || d.Choice == nil {
		return d.Plan, 0, err
	}
	return d.Plan, float64(d.Choice.TimeUs), nil
}

// Decide returns NCCL's decision for c: for a collective, the tuning model's algorithm, protocol,
// channels, threads and chunk size (NCCL 2.28 enqueue.cc topoGetAlgoInfo and calcCollChunking);
// for SendRecv and AllToAll the per-peer plan (NCCL 2.28 enqueue.cc addP2pToPlan). c.Exclude takes
// algorithms and protocols out of the choice as NCCL_ALGO=^…/NCCL_PROTO=^… would.
func (p *Planner) Decide(c coll.Call) (Decision, error) {
	n := p.NRanks()
	if err := c.Check(n); err != nil {
		return Decision{}, err
	}
	cfg := &p.Table.Config
	plan := coll.Plan{Func: c.Func, Count: c.Count, DataType: c.DataType, Op: c.Op, Root: c.Root, Peer: c.Peer,
		NRanks: n, NNodes: p.Nodes, Rings: p.Rings, Trees: p.Trees,
		BuffSize: [coll.NumProtos]int64{coll.LL: cfg.LLBuffSize, coll.LL128: cfg.LL128BuffSize, coll.Simple: cfg.BuffSize}}
	elt := c.DataType.Size()
	if c.Func == coll.SendRecv {
		return p.decideSendRecv(c, plan)
	}
	if c.Func == coll.AllToAll {
		// Every peer of a multi-node communicator is planned as a network peer (the most
		// constrained), in the node otherwise (NCCL 2.28 addP2pToPlan per peer).
		kind := tuning.PeerIntra
		switch {
		case p.Nodes > 1:
			kind = tuning.PeerNet
		case n == 1:
			kind = tuning.PeerSelf // the rank's copy to itself, its only transfer
		}
		ch, err := p.P2P(c.Count*int64(elt), kind, c.Exclude)
		if err != nil {
			return Decision{}, fmt.Errorf("planner: %v: %w", c.Func, err)
		}
		p.p2pPlan(&plan, ch)
		return Decision{Plan: plan, P2P: &ch}, nil
	}
	t := p.Table.Without(c.Exclude)
	ch, err := t.Select(tuning.Call{Func: c.Func, Count: c.Count, ElemSize: elt, Op: int(c.Op), DataType: int(c.DataType)})
	if err != nil {
		return Decision{}, err
	}
	if c.Exclude.Algos[ch.Algo] || c.Exclude.Protos[ch.Proto] {
		// Only a tuner-file rule can force a disabled cell.
		return Decision{}, fmt.Errorf("planner: %v %d bytes: %v/%v is excluded (%s) but a tuner rule forces it", c.Func, ch.Bytes, ch.Algo, ch.Proto, c.Exclude)
	}
	plan.Algo, plan.Proto, plan.NChannels, plan.ChannelLo = ch.Algo, ch.Proto, max(ch.NChannels, 1), ch.ChannelLo
	plan.NThreads, plan.ChunkSize = ch.NThreads, ch.ChunkSize
	// One rank: NCCL chooses nothing and copies the buffer (ncclLaunchOneRank); the model's pick
	// above only shapes the copy's schedule here.
	ch.OneRank = plan.OneRankCopy()
	switch plan.Algo {
	case coll.CollNetChain:
		// NCCL 2.28 runs CollNetChain on the CollNet chain graph's channels: on every node the
		// chain of channel c is that graph's intra[c], headed by intra[c][0], the GPU beside the
		// channel's NIC (connectCollNet). coll takes each node's chain from the plan's ring.
		rings, err := p.collnetRings(plan.ChannelLo + plan.NChannels)
		if err != nil {
			return Decision{}, err
		}
		plan.Rings, plan.Trees = rings, nil
	case coll.CollNetDirect:
		// NCCL 2.28's CollNet direct heads: the distinct first GPUs of the CollNet direct graph's
		// channels, each beside its own NIC; every rank sends each head its part.
		plan.Rings, plan.Trees = nil, nil
		if g := p.Search.CollNetDirect; g != nil {
			seen := map[int]bool{}
			for _, ch := range g.Intra {
				if len(ch) > 0 && !seen[ch[0]] {
					seen[ch[0]] = true
					plan.CollNetHeads = append(plan.CollNetHeads, ch[0])
				}
			}
		}
	case coll.NVLS, coll.NVLSTree:
		// These run on their own channels (NVLS's nvlsChannels may outnumber the ring graph's),
		// through switches and the trees they derive (NCCL 2.28 nvls.cc, collnet setup): the
		// search's rings and trees are not theirs.
		plan.Rings, plan.Trees = nil, nil
		plan.NVLSHeads = p.nvlsHeads(plan.NRanks / max(plan.NNodes, 1))
	}
	return Decision{Plan: plan, Choice: &ch}, nil
}

// nvlsHeads are NCCL's NVLS heads on nodes of ppn ranks (NCCL 2.28 connectNvls): the first rank
// of each channel of the NVLS graph, in channel order, as local ranks; nil where they are every
// local rank in order (nodes of up to 32 GPUs, whose NVLS graph has a channel per GPU) or the
// search found no NVLS graph.
func (p *Planner) nvlsHeads(ppn int) []int {
	g := p.Search.NVLS
	if g == nil || ppn <= 0 {
		return nil
	}
	var heads []int
	seen := map[int]bool{}
	for _, ch := range g.Intra[:min(len(g.Intra), g.NChannels)] {
		if len(ch) > 0 && !seen[ch[0]%ppn] {
			seen[ch[0]%ppn] = true
			heads = append(heads, ch[0]%ppn)
		}
	}
	identity := len(heads) == ppn
	for h, q := range heads {
		identity = identity && q == h
	}
	if identity || len(heads) == 0 {
		return nil
	}
	return heads
}

// collnetRings are n channels' orders over every rank from the CollNet chain graph: node after
// node, each node's ranks in the graph's chain of that channel (repeated as NCCL duplicates
// channels); nil where the search found no chain (coll then takes the ranks in order).
func (p *Planner) collnetRings(n int) ([][]int, error) {
	g := p.Search.CollNetChain
	if g == nil || len(g.Intra) == 0 || n < 1 {
		return nil, nil
	}
	chains := make([][]int, n)
	for c := range chains {
		chains[c] = g.Intra[c%len(g.Intra)]
	}
	rings, err := coll.BuildRings(chains, p.Nodes, p.PPN, false)
	if err != nil {
		return nil, fmt.Errorf("planner: %s: CollNet chains: %w", p.Name, err)
	}
	return rings, nil
}

// p2pPlan sets a point-to-point plan's protocol, channels (per transfer, and the communicator's
// p2p channels they share) and chunk from one transfer's choice.
func (p *Planner) p2pPlan(plan *coll.Plan, ch tuning.P2PChoice) {
	total, _ := p.Table.P2PChannels()
	plan.Algo, plan.Proto, plan.NChannels, plan.P2PChannels = coll.Ring, ch.Proto, max(ch.NChannels, 1), max(total, 1)
	// Point-to-point channels may outnumber the collective ones (p2pnChannels is a power of
	// two); coll wants a ring and a tree per channel, which point-to-point does not follow.
	plan.Rings, plan.Trees = repeatRings(p.Rings, plan.P2PChannels), repeatTrees(p.Trees, plan.P2PChannels)
	if ch.Proto == coll.Simple {
		plan.ChunkSize = ch.ChunkSize
	}
}

// decideSendRecv plans a group of sends and receives: each transfer as NCCL plans a transfer of
// its size to its peer (NCCL 2.28 addP2pToPlan): a peer in the node or across the network (by
// node), its channels, LL or Simple and its chunk. Without transfers the call is nccl-tests'
// pattern (rank r sends Count elements to r+Peer).
func (p *Planner) decideSendRecv(c coll.Call, plan coll.Plan) (Decision, error) {
	n, elt := p.NRanks(), int64(c.DataType.Size())
	transfers := c.Transfers
	if len(transfers) == 0 {
		peer := c.Peer
		if peer == 0 {
			peer = 1
		}
		transfers = make([]coll.Transfer, n)
		for r := range transfers {
			transfers[r] = coll.Transfer{From: r, To: ((r+peer)%n + n) % n, Count: c.Count}
		}
	}
	if len(transfers) == 0 {
		return Decision{}, fmt.Errorf("planner: SendRecv with no transfer")
	}
	out := make([]coll.Transfer, len(transfers))
	var first *tuning.P2PChoice
	var largest int64 = -1
	for i, t := range transfers {
		kind := tuning.PeerIntra
		switch {
		case t.From/p.PPN != t.To/p.PPN:
			kind = tuning.PeerNet
		case t.From == t.To:
			kind = tuning.PeerSelf
		}
		ch, err := p.P2P(t.Count*elt, kind, c.Exclude)
		if err != nil {
			return Decision{}, fmt.Errorf("planner: SendRecv transfer %d→%d: %w", t.From, t.To, err)
		}
		out[i] = coll.Transfer{From: t.From, To: t.To, Count: t.Count, NChannels: max(ch.NChannels, 1), LL: ch.Proto == coll.LL}
		if ch.Proto == coll.Simple {
			out[i].ChunkSize = ch.ChunkSize
		}
		if t.Count > largest {
			largest, first = t.Count, &ch
		}
	}
	p.p2pPlan(&plan, *first)
	// Every transfer carries its own protocol, channels and chunk; the plan's are the largest
	// transfer's, and its channels are the communicator's p2p channels the transfers share.
	plan.Proto, plan.ChunkSize, plan.NChannels = coll.Simple, 0, plan.P2PChannels
	for i := range out {
		out[i].NChannels = min(out[i].NChannels, plan.NChannels)
	}
	plan.Transfers = out
	return Decision{Plan: plan, P2P: first}, nil
}

func repeatRings(rings [][]int, n int) [][]int {
	if len(rings) == 0 || len(rings) >= n {
		return rings
	}
	out := make([][]int, n)
	for c := range out {
		out[c] = rings[c%len(rings)]
	}
	return out
}

func repeatTrees(trees []coll.ChannelTree, n int) []coll.ChannelTree {
	if len(trees) == 0 || len(trees) >= n {
		return trees
	}
	out := make([]coll.ChannelTree, n)
	for c := range out {
		out[c] = trees[c%len(trees)]
	}
	return out
}

// P2P is NCCL's plan for one direction of a send/recv of nBytes to a peer of the given kind (in
// the node, or across the network), with the exclusions of ex (NCCL 2.28 enqueue.cc addP2pToPlan,
// tuning.Table.P2P). Decide plans every transfer of a call as a network transfer when the
// communicator spans nodes; the memory model asks for both kinds.
func (p *Planner) P2P(nBytes int64, kind tuning.PeerKind, ex coll.Exclude) (tuning.P2PChoice, error) {
	ch, err := p.Table.P2P(nBytes, kind)
	if err != nil {
		return ch, err
	}
	if ch.Proto == coll.LL && ex.Protos[coll.LL] {
		// Without LL a transfer goes as Simple, in chunks of the P2P chunk size.
		ch.Proto, ch.StepSize = coll.Simple, p.Table.P2PChunkSize()
		ch.ChunkSize = ch.StepSize
	}
	if ex.Protos[ch.Proto] {
		return ch, fmt.Errorf("%d bytes: NCCL's point-to-point uses %v, which is excluded (%s)", nBytes, ch.Proto, ex)
	}
	return ch, nil
}
