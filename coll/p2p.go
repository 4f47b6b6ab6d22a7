package coll

import (
	"fmt"
	"sort"
)

// p2pMsg is one rank-to-rank transfer of a SendRecv or AllToAll operation, with its place in both
// buffers (elements).
type p2pMsg struct {
	from, to         int
	sendOff, recvOff int64
	count            int64
	nch              int   // 0: the plan's
	chunk            int64 // 0: the plan's
	ll               bool
}

// p2pMessages lists the transfers of a SendRecv or AllToAll plan. SendRecv with Transfers lays each
// rank's outgoing transfers out back to back in its send buffer, in list order, and its incoming
// ones back to back in its receive buffer, in list order.
func p2pMessages(p *Plan) []p2pMsg {
	n := p.NRanks
	var out []p2pMsg
	switch {
	case p.Func == AllToAll:
		for r := 0; r < n; r++ {
			for j := 0; j < n; j++ {
				out = append(out, p2pMsg{from: r, to: j, sendOff: int64(j) * p.Count, recvOff: int64(r) * p.Count, count: p.Count})
			}
		}
	case len(p.Transfers) > 0:
		so := make([]int64, n)
		ro := make([]int64, n)
		for _, t := range p.Transfers {
			out = append(out, p2pMsg{from: t.From, to: t.To, sendOff: so[t.From], recvOff: ro[t.To], count: t.Count,
				nch: t.NChannels, chunk: t.ChunkSize, ll: t.LL})
			so[t.From] += t.Count
			ro[t.To] += t.Count
		}
	default:
		peer := p.Peer
		if peer == 0 {
			peer = 1
		}
		for r := 0; r < n; r++ {
			to := ((r+peer)%n + n) % n
			out = append(out, p2pMsg{from: r, to: to, count: p.Count})
		}
	}
	return out
}

// p2p compiles SendRecv and AllToAll as grouped sends and receives (NCCL 2.30.7 enqueue.cc
// addP2pToPlan, simplified): every transfer is split over the plan's channels in
// contiguous parts and each part into chunks of the P2P chunk size, one message per chunk on
// connIndex 1. On every rank and channel the sends run on lane 0 and the receives on lane 1, both
// ordered by ring distance (to−from mod n) as NCCL's p2p schedule orders peers, which keeps any
// pattern deadlock-free. A transfer to self is a local copy.
func (b *builder) p2p(p *Plan) error {
	if p.Proto == LL128 {
		return fmt.Errorf("%w: %v over LL128 (NCCL's point-to-point uses LL or Simple: 2.30.7 addP2pToPlan)", ErrUnsupported, p.Func)
	}
	n := p.NRanks
	nch := p.nChannels()
	elt := int64(p.DataType.Size())
	chunkingFor := p.p2pChunking
	b.s.Ops[b.op].ChunkSize = chunkingFor(p2pMsg{}).chunkElems * elt
	msgs := p2pMessages(p)
	dist := func(m p2pMsg) int { return ((m.to-m.from)%n + n) % n }
	sort.SliceStable(msgs, func(i, j int) bool { return dist(msgs[i]) < dist(msgs[j]) })
	cks := make([]*chunking, len(msgs))
	for i, m := range msgs {
		if m.nch < 0 || m.nch > nch || m.chunk < 0 {
			return fmt.Errorf("transfer %d→%d: %d channels, chunk %d (want 0..%d channels, chunk ≥ 0)", m.from, m.to, m.nch, m.chunk, nch)
		}
		if m.nch == 0 {
			msgs[i].nch = nch
		}
		cks[i] = chunkingFor(m)
	}
	for c := 0; c < nch; c++ {
		for mi, m := range msgs {
			// A transfer on fewer channels than the plan starts at a channel that depends on the peer
			// distance, so that different peers use different channels (NCCL spreads p2p peers over
			// channels by round; the exact base rule is not reproduced).
			base := 0
			if m.nch < nch {
				base = dist(m) % nch
			}
			part := (c - base + nch) % nch
			if part >= m.nch {
				continue
			}
			ck := cks[mi]
			offs, cnts := channelParts(m.count, m.nch, ck.align)
			if cnts[part] == 0 && !(part == 0 && m.count == 0) {
				continue
			}
			so, ro := (m.sendOff+offs[part])*elt, (m.recvOff+offs[part])*elt
			if m.from == m.to {
				b.emit(ck, call{rank: m.from, ch: c, lane: 0, prim: Copy, src: &BufRef{Buf: BufSend, Offset: so},
					dst: &BufRef{Buf: BufRecv, Offset: ro}, nelem: cnts[part]})
				continue
			}
			ci := 0
			for eo := int64(0); eo < cnts[part] || (eo == 0 && cnts[part] == 0); eo += ck.chunkElems {
				ne := min64(ck.chunkElems, cnts[part]-eo)
				b.emit(ck, call{rank: m.from, ch: c, lane: 0, prim: Send, sendTo: []int{m.to}, connIdx: 1,
					src: &BufRef{Buf: BufSend, Offset: so + eo*elt}, nelem: ne, chunk: ci})
				b.emit(ck, call{rank: m.to, ch: c, lane: 1, prim: Recv, recvFrom: []int{m.from}, connIdx: 1,
					dst: &BufRef{Buf: BufRecv, Offset: ro + eo*elt}, nelem: ne, chunk: ci})
				ci++
				if cnts[part] == 0 {
					break
				}
			}
		}
	}
	return nil
}

// p2pChunking is how a point-to-point transfer of plan p is cut: the plan's protocol (LL where
// the transfer says so), the plan's chunk size or the protocol's default.
func (p *Plan) p2pChunking(m p2pMsg) *chunking {
	elt := int64(p.DataType.Size())
	proto := p.Proto
	if m.ll {
		proto = LL
	}
	buff := p.BuffSize[proto]
	if buff <= 0 {
		buff = DefaultBuffSize[proto]
	}
	chunk := m.chunk
	if chunk == 0 && proto == p.Proto {
		chunk = p.ChunkSize
	}
	if chunk == 0 {
		if proto == LL {
			chunk = buff / NCCLSteps / 2 // one LL step of payload
		} else {
			chunk = min64(DefaultP2PChunkSize, buff/NCCLSteps)
		}
	}
	return &chunking{proto: proto, elt: elt, chunkElems: max64(chunk/elt, 1), slicesPerChk: 1, stepsPerSlice: 1,
		stepElems: buff / NCCLSteps / elt, align: max64(16/elt, 1)}
}

// P2PParts describes a transfer of count elements between two ranks as Compile cuts it in a
// SendRecv or AllToAll plan p spread over all of p's channels (a transfer with no channel count of
// its own), for executors that replay it without materialising the schedule (simnet's
// SimulateP2P): per channel of the plan (relative to ChannelLo), the payload bytes of each message,
// nil where that channel carries nothing. A transfer to self is one local copy per channel: its
// part's bytes.
func P2PParts(p *Plan, count int64, self bool) [][]int64 {
	ck := p.p2pChunking(p2pMsg{})
	nch := p.nChannels()
	_, cnts := channelParts(count, nch, ck.align)
	out := make([][]int64, nch)
	for part := 0; part < nch; part++ {
		if cnts[part] == 0 && !(part == 0 && count == 0) {
			continue
		}
		if self {
			out[part] = []int64{cnts[part] * ck.elt}
			continue
		}
		for eo := int64(0); eo < cnts[part] || (eo == 0 && cnts[part] == 0); eo += ck.chunkElems {
			out[part] = append(out[part], min64(ck.chunkElems, cnts[part]-eo)*ck.elt)
			if cnts[part] == 0 {
				break
			}
		}
	}
	return out
}

// P2PProto is the protocol a plan's point-to-point messages travel with (p.Proto; LL128 is not a
// point-to-point protocol, see p2p).
func P2PProto(p *Plan) Proto { return p.p2pChunking(p2pMsg{}).proto }
