package simnet

import (
	"fmt"

	"github.com/simccl/simccl/coll"
)

// compactColl reports whether f has a compact executor for some algorithm: the ring collectives
// (SimulateRing, and SimulateTree for AllReduce) and the point-to-point ones (SimulateP2P).
func compactColl(f coll.Func) bool {
	switch f {
	case coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.AllToAll, coll.SendRecv:
		return true
	}
	return false
}

// compactAlgo reports whether plan p of f runs on a compact executor.
func compactAlgo(f coll.Func, p coll.Plan) bool {
	switch f {
	case coll.AllToAll:
		return true
	case coll.SendRecv:
		// SimulateP2P replays transfers alike from every rank; the planner cuts each transfer
		// for its peer (in the node or across the network), so a send/recv over nodes whose
		// transfers differ runs on the schedule.
		_, err := P2POps([]coll.Plan{p})
		return err == nil
	case coll.AllReduce:
		return p.Algo == coll.Ring || p.Algo == coll.Tree
	case coll.AllGather, coll.ReduceScatter:
		return p.Algo == coll.Ring
	}
	return false
}

// scheduleSteps estimates the steps of the schedule of plan p for nBytes (algorithm bytes).
func (m *Machine) scheduleSteps(f coll.Func, p coll.Plan, nBytes int64) int64 {
	if f == coll.AllToAll || f == coll.SendRecv {
		// Two steps (a send and a receive) per chunk of every transfer.
		// nBytes is what one rank sends: to one peer (SendRecv) or to each of n (AllToAll).
		// A plan without a chunk of its own (a SendRecv whose transfers carry theirs) is counted
		// at the smallest chunk a transfer has, NCCL's LL step (an over-estimate is safe: it only
		// sends the call to the compact executor sooner).
		n := int64(p.NRanks)
		chunk := p.ChunkSize
		if chunk <= 0 {
			chunk = coll.DefaultBuffSize[coll.LL] / coll.NCCLSteps / 2
			for _, t := range p.Transfers {
				if t.ChunkSize > 0 && !t.LL {
					chunk = min(chunk, t.ChunkSize)
				}
			}
		}
		chunk = max(chunk, 1)
		per, transfers := nBytes, n
		if f == coll.AllToAll {
			per, transfers = nBytes/max(n, 1), n*n
		}
		return 2 * transfers * max((per+chunk-1)/chunk, int64(max(p.NChannels, 1)))
	}
	if p.Algo == coll.NVLS || p.Algo == coll.NVLSTree || p.Algo == coll.CollNetChain || p.Algo == coll.CollNetDirect || p.Algo == coll.PAT {
		// No ring or tree executor: coll's own estimate, which its switch programs and PAT's
		// positions follow.
		return int64(p.EstimatedSteps())
	}
	return ringSteps(p, nBytes)
}

// compact replays plan p of f on the compact executor for its algorithm and returns the result
// and the row's mode.
func (m *Machine) compact(f coll.Func, p coll.Plan, nBytes int64, tm Timing, opt RunOptions) (*Result, string, error) {
	e, cl, err := m.engine()
	if err != nil {
		return nil, "", err
	}
	switch {
	case f == coll.AllToAll || f == coll.SendRecv:
		ops, err := P2POps([]coll.Plan{p})
		if err != nil {
			return nil, "", err
		}
		var deferAbove int64
		var deferWork uint64
		if !opt.Exact && !opt.noSizes && !opt.noDefer && !opt.Record && opt.Transfers == nil {
			deferAbove = P2PDeferMessages
			if opt.deferPair != nil && opt.deferPair() {
				deferWork = P2PDeferWork
			}
		}
		pr, err := SimulateP2P(e, cl, P2PSpec{Ops: ops, Exact: opt.Exact, MeanOversubscribed: opt.MeanOversubscribed, HostFloor: opt.hostFloor, DeferAbove: deferAbove, DeferWork: deferWork, cache: &m.tmpl.p2p}, tm)
		if err != nil {
			return nil, "", err
		}
		return &Result{Time: pr.Time, Events: pr.Events, Messages: int(pr.Messages), LinkName: e.LinkName, MeanBacklog: pr.MeanBacklog}, pr.Mode(), nil
	case p.Algo == coll.Tree:
		tr, err := SimulateTreeDetail(e, cl, TreeSpec{Bytes: nBytes, Proto: p.Proto, Trees: p.Trees[p.ChannelLo : p.ChannelLo+p.NChannels],
			Chunk: p.ChunkSize, Exact: opt.Exact, MeanOversubscribed: opt.MeanOversubscribed, cache: &m.tmpl.trees}, tm)
		if err != nil {
			return nil, "", err
		}
		return &Result{Time: tr.Time, Events: tr.Events, Messages: int(tr.Messages), LinkName: e.LinkName, MeanBacklog: tr.MeanBacklog}, tr.Mode(), nil
	}
	rr, err := SimulateRing(e, cl, RingSpec{Func: f, Bytes: nBytes, Proto: p.Proto, Rings: p.Rings[p.ChannelLo : p.ChannelLo+p.NChannels],
		Chunk: p.ChunkSize, Exact: opt.Exact, MeanOversubscribed: opt.MeanOversubscribed}, tm)
	if err != nil {
		return nil, "", err
	}
	return &Result{Time: rr.Time, Events: rr.Events, Messages: int(rr.Messages), LinkName: e.LinkName}, rr.Mode(), nil
}

// Mode is the row mode of a ring replay: ring-compact (every step replayed: exact) or
// ring-coarse-K (K steps merged per message), followed by ", latency-mean" and ", ecmp-mean"
// where those approximations stand for the exact replay.
func (r *RingResult) Mode() string {
	mode := "ring-compact"
	if r.Merge > 1 {
		mode = fmt.Sprintf("ring-coarse-%d", r.Merge)
	}
	if r.LatencyMean {
		mode += ", latency-mean"
	}
	if r.ECMPMean {
		mode += ", ecmp-mean"
	}
	return mode
}
