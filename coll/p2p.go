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
	// occ is how many transfers from→to come before this one in the group (SendRecv with
	// Transfers): NCCL takes one send and one receive per peer on each pass over its rounds, so
	// the occ-th transfer to a peer is a work of pass occ.
	occ int
}

// shownTransfer is the transfer whose chunk the op shows: the largest of a SendRecv group (the one
// Plan.Shown reads the protocol and channels of), else the plan's own (every AllToAll transfer is
// planned alike).
func shownTransfer(p *Plan, msgs []p2pMsg) p2pMsg {
	if p.Func != SendRecv || len(p.Transfers) == 0 || len(msgs) == 0 {
		return p2pMsg{}
	}
	best := msgs[0]
	for _, m := range msgs[1:] {
		if m.count > best.count {
			best = m
		}
	}
	return best
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
		seen := map[[2]int]int{}
		for _, t := range p.Transfers {
			pair := [2]int{t.From, t.To}
			out = append(out, p2pMsg{from: t.From, to: t.To, sendOff: so[t.From], recvOff: ro[t.To], count: t.Count,
				nch: t.NChannels, chunk: t.ChunkSize, ll: t.LL, occ: seen[pair]})
			seen[pair]++
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

// P2PBatch is how many point-to-point rounds (peer distances) of a rank a channel runs at once:
// NCCL packs a channel's p2p work into batches of at most NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8
// works (NCCL 2.19+ device.h; one work is one round's send and receive) and its kernel runs the
// works of a batch concurrently, its warps shared among them, one batch after another. A batch
// holds at most one work of a round: a second transfer to the same peer in one group (the next
// pass over the rounds) starts a new batch, so such transfers run one after another, each paying
// a batch's start and end (NCCL 2.28 on 2 H200: K grouped send/recv pairs of 8 B–4 KiB to one
// peer take 3.6 µs more per pair up to K = 32 on the GPU, testdata/nccl/p2popsscan.sh).
const P2PBatch = 8

// p2p compiles SendRecv and AllToAll as grouped sends and receives (NCCL 2.30.7 enqueue.cc
// addP2pToPlan, simplified): every transfer is split over the plan's channels in
// contiguous parts and each part into chunks of the P2P chunk size, one message per chunk on
// connIndex 1. On every rank and channel the transfers are ordered by ring distance (to−from mod
// n) as NCCL's p2p schedule orders peers, which keeps any pattern deadlock-free, and run in
// batches of P2PBatch distances: slot j of a batch sends on lane 2j and receives on lane 2j+1,
// the slots of a batch run at once and the next batch starts when all are done. A transfer to
// self is a local copy on its slot's sending lane.
func (b *builder) p2p(p *Plan) error {
	if p.Proto == LL128 {
		return fmt.Errorf("%w: %v over LL128 (NCCL's point-to-point uses LL or Simple: 2.30.7 addP2pToPlan)", ErrUnsupported, p.Func)
	}
	n := p.NRanks
	nch := p.channelSpan()
	elt := int64(p.DataType.Size())
	chunkingFor := p.p2pChunking
	msgs := p2pMessages(p)
	b.s.Ops[b.op].ChunkSize = chunkingFor(shownTransfer(p, msgs)).chunkElems * elt
	dist := func(m p2pMsg) int { return ((m.to-m.from)%n + n) % n }
	// NCCL's passes over the rounds: the first transfer to every peer by round, then the second…
	sort.SliceStable(msgs, func(i, j int) bool {
		if msgs[i].occ != msgs[j].occ {
			return msgs[i].occ < msgs[j].occ
		}
		return dist(msgs[i]) < dist(msgs[j])
	})
	cks := make([]*chunking, len(msgs))
	for i, m := range msgs {
		if m.nch < 0 || m.nch > nch || m.chunk < 0 {
			return fmt.Errorf("transfer %d→%d: %d channels, chunk %d (want 0..%d channels, chunk ≥ 0)", m.from, m.to, m.nch, m.chunk, nch)
		}
		if m.nch == 0 {
			msgs[i].nch = p.nChannels()
		}
		cks[i] = chunkingFor(m)
	}
	// NCCL's batches: a channel runs up to P2PBatch rounds of a rank at once (one send and one
	// receive each, on lanes 2j and 2j+1 of slot j), and the next batch after all of them; a
	// round already in the batch (a later pass's transfer to the same peer) starts the next one.
	type round struct{ dist, occ int }
	open := map[int][]round{} // per program, the rounds of its open batch: slot j is open[k][j]
	slot := func(rank, c, dist, occ int) int {
		k := rank*b.s.NChannels + c + b.base
		r, rs := round{dist, occ}, open[k]
		repeat := false
		for j, q := range rs {
			if q == r {
				return j
			}
			repeat = repeat || q.dist == dist
		}
		if len(rs) == P2PBatch || repeat {
			b.ps[k].close()
			rs = rs[:0]
		}
		open[k] = append(rs, r)
		return len(rs)
	}
	for c := 0; c < nch; c++ {
		for mi, m := range msgs {
			part := m.part(c, n, nch)
			if part < 0 {
				continue
			}
			ck := cks[mi]
			offs, cnts := channelParts(m.count, m.nch, ck.align)
			if cnts[part] == 0 && !(part == 0 && m.count == 0) {
				continue
			}
			so, ro := (m.sendOff+offs[part])*elt, (m.recvOff+offs[part])*elt
			d := dist(m)
			if m.from == m.to {
				b.emit(ck, call{rank: m.from, ch: c, lane: 2 * slot(m.from, c, d, m.occ), prim: Copy, src: &BufRef{Buf: BufSend, Offset: so},
					dst: &BufRef{Buf: BufRecv, Offset: ro}, nelem: cnts[part]})
				continue
			}
			ci := 0
			sl, rl := 2*slot(m.from, c, d, m.occ), 2*slot(m.to, c, d, m.occ)+1
			for eo := int64(0); eo < cnts[part] || (eo == 0 && cnts[part] == 0); eo += ck.chunkElems {
				ne := min64(ck.chunkElems, cnts[part]-eo)
				b.emit(ck, call{rank: m.from, ch: c, lane: sl, prim: Send, sendTo: []int{m.to}, connIdx: 1,
					src: &BufRef{Buf: BufSend, Offset: so + eo*elt}, nelem: ne, chunk: ci})
				b.emit(ck, call{rank: m.to, ch: c, lane: rl, prim: Recv, recvFrom: []int{m.from}, connIdx: 1,
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

// part is the part of m that channel c carries, or −1. A transfer on fewer channels than the plan
// starts at a channel that depends on the peer distance, so that different peers use different
// channels (NCCL spreads p2p peers over channels by round; the exact base rule is not reproduced).
// m.nch must be resolved (non-zero).
func (m p2pMsg) part(c, n, nch int) int {
	dist := ((m.to-m.from)%n + n) % n
	for part := 0; part < m.nch; part++ {
		if p2pChannel(dist, part, nch) == c {
			return part
		}
	}
	return -1
}

// p2pChannel is the channel of part `part` of a transfer at ring distance dist over nch p2p
// channels: NCCL starts the round of peer distance d at channel d and spreads a transfer's parts
// over the p2p channels bit-reversed (NCCL 2.28 enqueue.cc scheduleP2pTasksToPlan, single-node
// form; the multi-node base, which groups rounds by node, is not reproduced). nch is a power of
// two when it is NCCL's p2pnChannels; otherwise the parts take consecutive channels.
func p2pChannel(dist, part, nch int) int {
	delta := part
	if bits := log2Exact(nch); bits >= 0 {
		delta = reverseBits(part, bits)
	}
	return (dist + delta) % nch
}

// log2Exact is log2(n) for a power of two n ≥ 1, else −1.
func log2Exact(n int) int {
	if n < 1 || n&(n-1) != 0 {
		return -1
	}
	b := 0
	for n > 1 {
		n >>= 1
		b++
	}
	return b
}

// reverseBits reverses the low `bits` bits of v.
func reverseBits(v, bits int) int {
	r := 0
	for i := 0; i < bits; i++ {
		r = r<<1 | (v>>i)&1
	}
	return r
}

// P2PChannels lists the channels Compile puts a point-to-point transfer on when it is split over k
// of a plan's nch channels and every part holds data (p2pChannel of parts 0..k−1), for the ring
// distance dist = (to − from) mod nRanks.
func P2PChannels(dist, nch, k int) []int {
	k = min(max(k, 1), nch)
	out := make([]int, k)
	for i := range out {
		out[i] = p2pChannel(dist, i, nch)
	}
	return out
}

// channels lists the channels that carry data of m (Compile's choice; m.nch resolved).
func (m p2pMsg) channels(n, nch int, align int64) []int {
	_, cnts := channelParts(m.count, m.nch, align)
	var out []int
	for c := 0; c < nch; c++ {
		if part := m.part(c, n, nch); part >= 0 && (cnts[part] != 0 || (part == 0 && m.count == 0)) {
			out = append(out, c)
		}
	}
	return out
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

// P2PParts describes a transfer of count elements from a rank to the rank at ring distance dist
// ((to − from) mod nRanks) as Compile cuts it in a SendRecv or AllToAll plan p (a transfer with no
// channel count of its own), for executors that replay it without materialising the schedule
// (simnet's SimulateP2P): per channel of the plan's span (relative to ChannelLo; p2pChannel
// places the parts), the payload bytes of each message, nil where that channel carries nothing.
// A transfer to self (dist 0) is one local copy per part: its part's bytes.
func P2PParts(p *Plan, count int64, dist int) [][]int64 {
	ck := p.p2pChunking(p2pMsg{})
	k, span := p.nChannels(), p.channelSpan()
	_, cnts := channelParts(count, k, ck.align)
	out := make([][]int64, span)
	for part := 0; part < k; part++ {
		if cnts[part] == 0 && !(part == 0 && count == 0) {
			continue
		}
		c := p2pChannel(dist, part, span)
		if dist == 0 {
			out[c] = []int64{cnts[part] * ck.elt}
			continue
		}
		for eo := int64(0); eo < cnts[part] || (eo == 0 && cnts[part] == 0); eo += ck.chunkElems {
			out[c] = append(out[c], min64(ck.chunkElems, cnts[part]-eo)*ck.elt)
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
