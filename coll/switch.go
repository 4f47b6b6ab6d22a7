package coll

import "runtime"

// Connection indexes used by switch schedules: NCCL keeps the two directions of NVLS (scatter into
// the multicast buffer / multimem store of the result) and of CollNet chains (reduce up / broadcast
// down) on separate connectors, so their messages never share a FIFO.
const (
	connUp   = 0
	connDown = 2
)

func (b *builder) switchOf(kind string) int { return b.switchAt(kind, 0) }

// switchAt is the endpoint of the switch of a kind on a node (CollNet: node −1 or any).
func (b *builder) switchAt(kind string, node int) int {
	for _, sw := range b.s.Switches {
		if sw.Kind == kind && (sw.Node == node || kind == SwitchCollNet) {
			return sw.ID
		}
	}
	return -1
}

// nvls compiles single-node NVLS AllReduce (NCCL 2.30.7's NVLS kernel, paraphrased) through the
// node's NVSwitch as a switch endpoint. Each channel's part is walked in loops of one chunk per
// NVLS head (Plan.NVLSHeadRanks: NCCL's nHeads, every rank of a node of up to 32 GPUs, 32 of the
// 72 of a GB200 NVL72 rack); chunk h of a loop belongs to head h. Per loop, every rank sends each
// chunk to the switch (lane 0, the scatter warps); the switch reduces chunk h over all ranks and
// hands it to head h (multimem ld_reduce), head h sends it back (lane 1, the reduce warps,
// applying the post-op) and the switch multicasts it to every rank (multimem st); every rank
// receives all chunks into its receive buffer (lane 2, the gather warps). With every rank a head,
// a rank thus sends S + S/n and receives S/n + S for a buffer of S bytes, where a ring moves
// 2(n−1)/n·S each way; with H heads a head sends and receives S + S/H, the other ranks S.
func (b *builder) nvls(p *Plan, ck *chunking) error {
	n := p.NRanks
	sw := b.switchOf(SwitchNVLS)
	elt := ck.elt
	everyone := make([]int, n)
	for r := range everyone {
		everyone[r] = r
	}
	heads := p.NVLSHeadRanks()
	nh := len(heads)
	b.loopChunks(p, ck, nh, func(c, loop int, portion func(int) (int64, int64)) {
		for h, q := range heads { // scatter
			o, ne := portion(h)
			for r := 0; r < n; r++ {
				b.emit(ck, call{rank: r, ch: c, lane: 0, prim: Send, sendTo: []int{sw}, connIdx: connUp,
					src: &BufRef{Buf: BufSend, Offset: o * elt}, nelem: ne, chunk: loop*nh + h})
				b.fifos(c, r, sw, connUp, nh)
			}
			b.emit(ck, call{rank: sw, ch: c, lane: 0, prim: RecvReduceForward, recvFrom: everyone, sendTo: []int{q},
				connIdx: connUp, nelem: ne, chunk: loop*nh + h})
		}
		for h, q := range heads { // head h: reduced chunk back to the switch, which multicasts it
			_, ne := portion(h)
			b.emit(ck, call{rank: q, ch: c, lane: 1, prim: RecvSend, recvFrom: []int{sw}, sendTo: []int{sw},
				connIdx: connUp, sendIdx: connDown, hasSendIdx: true, nelem: ne, chunk: loop*nh + h, postOp: true})
			b.emit(ck, call{rank: sw, ch: c, lane: 1, prim: RecvSend, recvFrom: []int{q}, sendTo: everyone,
				connIdx: connDown, nelem: ne, chunk: loop*nh + h})
		}
		for h := range heads { // gather
			o, ne := portion(h)
			for r := 0; r < n; r++ {
				b.emit(ck, call{rank: r, ch: c, lane: 2, prim: Recv, recvFrom: []int{sw}, connIdx: connDown,
					dst: &BufRef{Buf: BufRecv, Offset: o * elt}, nelem: ne, chunk: loop*nh + h})
				b.fifos(c, sw, r, connDown, nh)
			}
		}
	})
	return nil
}

// nvlsGatherScatter compiles single-node NVLS AllGather and ReduceScatter (NCCL 2.30.7,
// paraphrased). AllGather: every rank sends each chunk of its block to the switch once (multimem
// st), the switch multicasts it, and every rank receives it at the block's place in its receive
// buffer (lane 0 sends, lane 1 receives). ReduceScatter: every rank sends each chunk of every
// block to the switch, the switch reduces block q's chunk over all ranks and hands it to rank q
// (multimem ld_reduce), which writes it with the post-op. As in nvls, the connection that stands
// for NCCL's per-head FIFOs (AllGather's gather, ReduceScatter's scatter) gets NCCL_STEPS slots
// per head.
func (b *builder) nvlsGatherScatter(p *Plan, ck *chunking) error {
	n := p.NRanks
	sw := b.switchOf(SwitchNVLS)
	elt := ck.elt
	count := p.Count
	offs, cnts := p.parts(count, ck.align)
	everyone := make([]int, n)
	for r := range everyone {
		everyone[r] = r
	}
	for c := 0; c < p.nChannels(); c++ {
		part, cnt := offs[c], cnts[c]
		ci := 0
		for eo := int64(0); eo < cnt; eo += ck.chunkElems {
			ne := min64(ck.chunkElems, cnt-eo)
			data := part + eo
			for q := 0; q < n; q++ {
				blk := (int64(q)*count + data) * elt
				if p.Func == AllGather {
					b.emit(ck, call{rank: q, ch: c, lane: 0, prim: Send, sendTo: []int{sw}, connIdx: connUp,
						src: &BufRef{Buf: BufSend, Offset: data * elt}, nelem: ne, chunk: ci})
					b.emit(ck, call{rank: sw, ch: c, prim: RecvSend, recvFrom: []int{q}, sendTo: everyone, connIdx: connUp,
						sendIdx: connDown, hasSendIdx: true, nelem: ne, chunk: ci})
					for r := 0; r < n; r++ {
						b.emit(ck, call{rank: r, ch: c, lane: 1, prim: Recv, recvFrom: []int{sw}, connIdx: connDown,
							dst: &BufRef{Buf: BufRecv, Offset: blk}, nelem: ne, chunk: ci})
						b.fifos(c, sw, r, connDown, n) // NCCL's gather: one FIFO per head (nvls->up)
					}
					continue
				}
				for r := 0; r < n; r++ {
					b.emit(ck, call{rank: r, ch: c, lane: 0, prim: Send, sendTo: []int{sw}, connIdx: connUp,
						src: &BufRef{Buf: BufSend, Offset: blk}, nelem: ne, chunk: ci})
					b.fifos(c, r, sw, connUp, n) // NCCL's scatter: one FIFO per head (nvls->up)
				}
				b.emit(ck, call{rank: sw, ch: c, prim: RecvReduceForward, recvFrom: everyone, sendTo: []int{q}, connIdx: connUp,
					sendIdx: connDown, hasSendIdx: true, nelem: ne, chunk: ci})
				b.emit(ck, call{rank: q, ch: c, lane: 1, prim: Recv, recvFrom: []int{sw}, connIdx: connDown,
					dst: &BufRef{Buf: BufRecv, Offset: data * elt}, nelem: ne, chunk: ci, postOp: true})
			}
			ci++
		}
	}
	return nil
}

// nvlsTree compiles NVLSTree AllReduce over nodes of ppn ranks (NCCL 2.30.7, paraphrased;
// connectNvls: the NVLS heads of the nodes form the double binary tree, channel parity picking tree
// 0 or 1). Each loop of a channel covers one chunk per NVLS head (Plan.NVLSHeadRanks); chunk h
// belongs to head h, the same local rank j of every node. Every rank sends each chunk to its
// node's switch (lane 0); the switch reduces chunk h over the node and hands it to head j (lane 0
// of the switch); head j reduces it with what its child nodes' heads j send and passes it up to
// its parent node's head j (lane 1); the root heads send the result down to their children and to
// their own switch, inner heads forward what comes from above the same way (lane 2); each switch
// multicasts chunk h to its node (lane 1 of the switch) and every rank receives all chunks (lane
// 3).
func (b *builder) nvlsTree(p *Plan, ck *chunking) error {
	nNodes := max(1, p.NNodes)
	ppn := p.NRanks / nNodes
	heads := p.NVLSHeadRanks()
	nh := len(heads)
	chunks := func(b *builder) func(c, loop int, portion func(int) (int64, int64)) {
		return func(c, loop int, portion func(int) (int64, int64)) {
			for h, j := range heads {
				o, ne := portion(h)
				b.nvlsTreeChunk(ck, p, c, j, nh, loop*nh+h, o, ne)
			}
		}
	}
	// A channel's steps and connections are its own: on a large call the upper half of the
	// channels is compiled beside the lower half, by a builder of its own whose connections
	// then follow the lower half's (join), as one pass numbers them.
	nch := p.nChannels()
	if h := nch / 2; h > 0 && len(b.s.Conns) == 0 &&
		forkChannels(int64(p.NRanks)*int64(ppn)*max64(1, p.Count/(int64(nh)*ck.chunkElems))) {
		b2 := b.fork()
		done := make(chan struct{})
		go func() {
			defer close(done)
			b2.loopChunkRange(p, ck, nh, h, nch, chunks(b2))
		}()
		b.loopChunkRange(p, ck, nh, 0, h, chunks(b))
		<-done
		b.join(b2)
		return nil
	}
	b.loopChunks(p, ck, nh, chunks(b))
	return nil
}

// forkChannels reports whether a switch schedule of about work steps compiles half of its
// channels on a second builder at once: from 65,536 where there are two cores (tests set it).
var forkChannels = func(work int64) bool { return work >= 1<<16 && runtime.GOMAXPROCS(0) > 1 }

// fork is a builder of the same programs, to compile channels b leaves alone: it numbers its own
// connections from 0 and keeps its transfer slabs for join.
func (b *builder) fork() *builder {
	return &builder{
		s:         &Schedule{NRanks: b.s.NRanks, NChannels: b.s.NChannels, Switches: b.s.Switches, Programs: b.s.Programs},
		conns:     map[uint64]int32{},
		connCache: new([1 << connCacheBits]connCacheEntry),
		ps:        b.ps,
		op:        b.op,
		base:      b.base,
		keepX:     true,
	}
}

// join takes the connections of b2 (a fork of b that compiled channels after b's) after b's:
// b2's are renumbered after them, in its transfers too.
func (b *builder) join(b2 *builder) {
	n1 := len(b.s.Conns)
	if n1 > 0 {
		for _, xs := range append(b2.xslabs, b2.xslab) {
			for i := range xs {
				xs[i].Conn += int32(n1)
			}
		}
	}
	for _, cn := range b2.s.Conns {
		cn.ID += n1
		b.conns[connWord(cn.Channel, cn.From, cn.To, cn.ConnIndex)] = int32(cn.ID)
		b.s.Conns = append(b.s.Conns, cn)
	}
	b.cst = append(b.cst, b2.cst...)
}

// nodeTree is node's parent (−1 at the root) and children in the NVLSTree tree of channel c of
// the call: p.NodeTrees where given, else the double binary tree of the channel's parity.
func (p *Plan) nodeTree(c, node int) (up int, kids []int) {
	if p.NodeTrees != nil {
		t := &p.NodeTrees[p.ChannelLo+c]
		return t.Up[node], t.Down[node]
	}
	up, d0, d1, _ := Dtree(max(1, p.NNodes), node, (p.ChannelLo+c)%2)
	for _, d := range []int{d0, d1} {
		if d >= 0 {
			kids = append(kids, d)
		}
	}
	return up, kids
}

// looseKid reports whether node's child d in the NVLSTree tree of channel c is loose
// (ChannelTree.Loose).
func (p *Plan) looseKid(c, node, d int) bool {
	if p.NodeTrees == nil {
		return false
	}
	t := &p.NodeTrees[p.ChannelLo+c]
	return t.Loose != nil && contains(t.Loose[node], d)
}

// nvlsTreeChunk emits chunk ci (head j, a local rank, one of nh heads; elements o, ne) of
// NVLSTree channel c.
func (b *builder) nvlsTreeChunk(ck *chunking, p *Plan, c, j, nh, ci int, o, ne int64) {
	nNodes := max(1, p.NNodes)
	ppn := p.NRanks / nNodes
	for node := 0; node < nNodes; node++ {
		b.nvlsScatter(ck, c, node, ppn, nh, j, o, ne, ci)
	}
	for node := 0; node < nNodes; node++ { // reduce up the tree of heads j
		up, ds := p.nodeTree(c, node)
		head := node*ppn + j
		from := []int{b.switchAt(SwitchNVLS, node)}
		var kids []int
		for _, d := range ds {
			kids = append(kids, d*ppn+j)
			if p.looseKid(c, node, d) {
				b.emit(ck, call{rank: head, ch: c, lane: 4, prim: Recv, recvFrom: []int{d*ppn + j}, connIdx: connUp,
					dst: &BufRef{Buf: BufRecv, Offset: o * ck.elt}, nelem: ne, chunk: ci})
				continue
			}
			from = append(from, d*ppn+j)
		}
		prim := RecvSend
		if len(from) > 1 {
			prim = RecvReduceForward
		}
		if up >= 0 {
			b.emit(ck, call{rank: head, ch: c, lane: 1, prim: prim, recvFrom: from, sendTo: []int{up*ppn + j},
				connIdx: connUp, nelem: ne, chunk: ci})
		} else {
			to := append(append([]int(nil), kids...), b.switchAt(SwitchNVLS, node))
			b.emit(ck, call{rank: head, ch: c, lane: 1, prim: prim, recvFrom: from, sendTo: to,
				connIdx: connUp, sendIdx: connDown, hasSendIdx: true, nelem: ne, chunk: ci, postOp: true})
		}
	}
	for node := 0; node < nNodes; node++ { // broadcast down the tree, multicast in the node
		up, ds := p.nodeTree(c, node)
		if up >= 0 {
			to := []int{}
			for _, d := range ds {
				to = append(to, d*ppn+j)
			}
			to = append(to, b.switchAt(SwitchNVLS, node))
			b.emit(ck, call{rank: node*ppn + j, ch: c, lane: 2, prim: RecvSend, recvFrom: []int{up*ppn + j}, sendTo: to,
				connIdx: connDown, nelem: ne, chunk: ci})
		}
		b.nvlsMulticast(ck, c, node, ppn, nh, j, o, ne, ci)
	}
}

// loopChunks walks p's channels as NCCL's switch kernels do (NVLS, NVLSTree, CollNet): each loop
// of a channel covers k chunks, chunk j of a loop belonging to its j-th head (a rank of the node,
// or of every node); fn gets the channel, the loop and each chunk's element offset and count
// (the last loop's chunks are shrunk to share what is left).
func (b *builder) loopChunks(p *Plan, ck *chunking, k int, fn func(c, loop int, portion func(j int) (o, ne int64))) {
	b.loopChunkRange(p, ck, k, 0, p.nChannels(), fn)
}

// loopChunkRange is loopChunks over channels c0..c1−1.
func (b *builder) loopChunkRange(p *Plan, ck *chunking, k, c0, c1 int, fn func(c, loop int, portion func(j int) (o, ne int64))) {
	offs, cnts := p.parts(p.Count, ck.align)
	var mark []int
	for c := c0; c < c1; c++ {
		part, cnt := offs[c], cnts[c]
		loops := divUp(cnt, int64(k)*ck.chunkElems)
		mark = b.lens(c, mark)
		loop := 0
		for eo := int64(0); eo < cnt; eo += int64(k) * ck.chunkElems {
			rem := cnt - eo
			cc := ck.chunkElems
			if rem < int64(k)*cc {
				cc = alignUp(divUp(rem, int64(k)), ck.align)
			}
			fn(c, loop, func(j int) (int64, int64) {
				co := min64(int64(j)*cc, rem)
				return part + eo + co, max64(0, min64(cc, rem-co))
			})
			if loop == 0 && loops > 1 {
				// Every loop emits the steps the first did (the last one's chunks are smaller,
				// not fewer): room for them all, instead of growing each program as it goes.
				b.reserve(c, mark, int(loops-1))
			}
			loop++
		}
	}
}

// lens is the number of steps of every endpoint's program on the current operation's channel c,
// in buf.
func (b *builder) lens(c int, buf []int) []int {
	buf = buf[:0]
	nch := b.s.NChannels
	for p := c + b.base; p < len(b.s.Programs); p += nch {
		buf = append(buf, len(b.s.Programs[p].Steps))
	}
	return buf
}

// reserve makes room in every endpoint's program on channel c for times as many steps again as
// it got since lens gave mark.
func (b *builder) reserve(c int, mark []int, times int) {
	nch := b.s.NChannels
	for e, p := 0, c+b.base; p < len(b.s.Programs); e, p = e+1, p+nch {
		steps := b.s.Programs[p].Steps
		if add := (len(steps) - mark[e]) * times; cap(steps)-len(steps) < add {
			b.s.Programs[p].Steps = append(make([]Step, 0, len(steps)+add), steps...)
		}
	}
}

// scratch is n peers of the builder's scratch list (a call's peer list, which emit does not keep).
func (b *builder) scratch(n int) []int {
	if cap(b.peers) < n {
		b.peers = make([]int, n)
	}
	return b.peers[:n]
}

// nvlsScatter emits chunk ci (elements o, ne) of channel c going from every rank of node to the
// node's switch (lane 0) and the switch's reduction of it handed to the node's local rank j.
func (b *builder) nvlsScatter(ck *chunking, c, node, ppn, nh, j int, o, ne int64, ci int) {
	sw := b.switchAt(SwitchNVLS, node)
	local := b.scratch(ppn)
	for l := range local {
		local[l] = node*ppn + l
		b.emit(ck, call{rank: local[l], ch: c, lane: 0, prim: Send, sendTo: []int{sw}, connIdx: connUp,
			src: &BufRef{Buf: BufSend, Offset: o * ck.elt}, nelem: ne, chunk: ci})
		b.fifos(c, local[l], sw, connUp, nh)
	}
	b.emit(ck, call{rank: sw, ch: c, lane: 0, prim: RecvReduceForward, recvFrom: local, sendTo: []int{node*ppn + j},
		connIdx: connUp, nelem: ne, chunk: ci})
}

// nvlsMulticast emits the node's switch multicasting chunk ci, which local rank j sends it, to
// the node (lane 1 of the switch) and every rank of the node receiving it into its output (lane 3).
func (b *builder) nvlsMulticast(ck *chunking, c, node, ppn, nh, j int, o, ne int64, ci int) {
	sw := b.switchAt(SwitchNVLS, node)
	local := b.scratch(ppn)
	for l := range local {
		local[l] = node*ppn + l
	}
	b.emit(ck, call{rank: sw, ch: c, lane: 1, prim: RecvSend, recvFrom: []int{node*ppn + j}, sendTo: local,
		connIdx: connDown, nelem: ne, chunk: ci})
	for _, r := range local {
		b.emit(ck, call{rank: r, ch: c, lane: 3, prim: Recv, recvFrom: []int{sw}, connIdx: connDown,
			dst: &BufRef{Buf: BufRecv, Offset: o * ck.elt}, nelem: ne, chunk: ci})
		b.fifos(c, sw, r, connDown, nh)
	}
}

// nvlsCollNet compiles NVLS AllReduce across nodes, NVLS with CollNet (NCCL 2.28 runs NVLS on
// several nodes only with a CollNet plugin, SHARP: "NVLS+SHARP"; paraphrased from its NVLS kernel,
// whose heads send to and receive from the network instead of a tree): as nvlsTree, each loop of
// a channel covers one chunk per NVLS head, chunk h belonging to head h, the same local rank j of
// every node. Every rank sends each chunk to its node's switch (lane 0); the switch reduces chunk
// h over the node and hands it to head j (lane 0 of the switch); head j sends it to the network's
// reduction (lane 1); the network reduces chunk h over the nodes' heads j and returns it to each of
// them; head j passes it, with the post-op, to its switch (lane 2), which multicasts it to the
// node (lane 1 of the switch); every rank receives all chunks (lane 3).
func (b *builder) nvlsCollNet(p *Plan, ck *chunking) error {
	nNodes := max(1, p.NNodes)
	ppn := p.NRanks / nNodes
	net := b.switchOf(SwitchCollNet)
	heads := p.NVLSHeadRanks()
	nh := len(heads)
	b.loopChunks(p, ck, nh, func(c, loop int, portion func(int) (int64, int64)) {
		for h, j := range heads {
			o, ne := portion(h)
			b.nvlsCollNetChunk(ck, c, nNodes, ppn, nh, net, j, loop*nh+h, o, ne)
		}
	})
	return nil
}

// nvlsCollNetChunk emits chunk ci (head j, a local rank, one of nh heads; elements o, ne) of
// NVLS-with-CollNet channel c.
func (b *builder) nvlsCollNetChunk(ck *chunking, c, nNodes, ppn, nh, net, j, ci int, o, ne int64) {
	heads := make([]int, nNodes) // a step keeps its peer lists
	for node := 0; node < nNodes; node++ {
		b.nvlsScatter(ck, c, node, ppn, nh, j, o, ne, ci)
		heads[node] = node*ppn + j
		b.emit(ck, call{rank: heads[node], ch: c, lane: 1, prim: RecvSend, recvFrom: []int{b.switchAt(SwitchNVLS, node)},
			sendTo: []int{net}, connIdx: connUp, nelem: ne, chunk: ci})
	}
	b.emit(ck, call{rank: net, ch: c, prim: RecvReduceForward, recvFrom: heads, sendTo: heads, connIdx: connUp,
		sendIdx: connDown, hasSendIdx: true, nelem: ne, chunk: ci})
	for node := 0; node < nNodes; node++ { // back from the network, multicast in the node
		b.emit(ck, call{rank: heads[node], ch: c, lane: 2, prim: RecvSend, recvFrom: []int{net},
			sendTo: []int{b.switchAt(SwitchNVLS, node)}, connIdx: connDown, nelem: ne, chunk: ci, postOp: true})
		b.nvlsMulticast(ck, c, node, ppn, nh, j, o, ne, ci)
	}
}

// collnetDirect compiles CollNetDirect AllReduce (NCCL 2.28, paraphrased): every node has the same
// heads (Plan.CollNetHeads), each beside its own NIC; each loop of a channel covers one chunk per
// head, chunk j belonging to head j. Every other rank of the node sends chunk j to head j (lane
// 0); head j reduces them with its own and sends the node's sum to the network (lane 0); the
// network reduces chunk j over the nodes' heads j and returns it to each of them; head j writes it,
// with the post-op, and sends it to every other rank of its node (lane 1), which write it. NCCL
// scatters a rank's chunks to all heads in one primitive; here they are one step each, and each
// rank takes the heads in its own rotation (a head from the one after itself, ending with its own
// reduction, which waits for the others' parts; another rank from the (l+c)-th, l its local
// index), so that at each step the node's ranks send to different heads, as the scatter's pieces
// go out together, rather than all to one. On the way down a head forwards its own chunk first
// (it waits only for the network) and then receives the other heads'.
func (b *builder) collnetDirect(p *Plan, ck *chunking) error {
	nNodes := max(1, p.NNodes)
	ppn := p.NRanks / nNodes
	heads := p.CollNetHeads
	if len(heads) == 0 {
		heads = make([]int, ppn)
		for i := range heads {
			heads[i] = i
		}
	}
	nh := len(heads)
	net := b.switchOf(SwitchCollNet)
	elt := ck.elt
	others := func(node, head int) []int { // a step keeps its peer lists: a new slice each time
		var out []int
		for l := 0; l < ppn; l++ {
			if r := node*ppn + l; r != head {
				out = append(out, r)
			}
		}
		return out
	}
	o := make([]int64, nh)
	ne := make([]int64, nh)
	// order is the heads local rank l of channel c takes on the way up (down: the head's own first).
	order := func(l, c int, down bool) []int {
		own := indexOf(heads, l)
		out := make([]int, 0, nh)
		if own < 0 {
			for t := 0; t < nh; t++ {
				out = append(out, (l+c+t)%nh)
			}
			return out
		}
		if down {
			out = append(out, own)
		}
		for t := 1; t < nh; t++ {
			out = append(out, (own+t)%nh)
		}
		if !down {
			out = append(out, own)
		}
		return out
	}
	b.loopChunks(p, ck, nh, func(c, loop int, portion func(int) (int64, int64)) {
		for j := range heads {
			o[j], ne[j] = portion(j)
		}
		ci := func(j int) int { return loop*nh + j }
		// visit calls fn for every rank r of every node with each head j in r's order (down: the way
		// back), head being head j's rank on r's node.
		visit := func(down bool, fn func(node, r, j, head int)) {
			for node := 0; node < nNodes; node++ {
				for l := 0; l < ppn; l++ {
					for _, j := range order(l, c, down) {
						fn(node, node*ppn+l, j, node*ppn+heads[j])
					}
				}
			}
		}
		visit(false, func(node, r, j, head int) { // up: every rank's part to each head, heads to the network
			src := &BufRef{Buf: BufSend, Offset: o[j] * elt}
			if r != head {
				b.emit(ck, call{rank: r, ch: c, lane: 0, prim: Send, sendTo: []int{head}, connIdx: connUp, src: src, nelem: ne[j], chunk: ci(j)})
				return
			}
			from := others(node, head)
			prim := RecvReduceSend
			if len(from) == 0 {
				prim = Send
			}
			b.emit(ck, call{rank: head, ch: c, lane: 0, prim: prim, recvFrom: from, sendTo: []int{net}, connIdx: connUp, src: src, nelem: ne[j], chunk: ci(j)})
		})
		for j, h := range heads { // the network reduces chunk j over the nodes' heads j
			nodeHeads := make([]int, nNodes)
			for node := range nodeHeads {
				nodeHeads[node] = node*ppn + h
			}
			b.emit(ck, call{rank: net, ch: c, prim: RecvReduceForward, recvFrom: nodeHeads, sendTo: nodeHeads, connIdx: connUp,
				sendIdx: connDown, hasSendIdx: true, nelem: ne[j], chunk: ci(j)})
		}
		visit(true, func(node, r, j, head int) { // down: each head to the rest of its node
			dst := &BufRef{Buf: BufRecv, Offset: o[j] * elt}
			if r != head {
				b.emit(ck, call{rank: r, ch: c, lane: 1, prim: Recv, recvFrom: []int{head}, connIdx: connDown, dst: dst, nelem: ne[j], chunk: ci(j)})
				return
			}
			cl := call{rank: head, ch: c, lane: 1, prim: RecvCopySend, recvFrom: []int{net}, sendTo: others(node, head), connIdx: connDown,
				dst: dst, nelem: ne[j], chunk: ci(j), postOp: true}
			if len(cl.sendTo) == 0 {
				cl.prim, cl.sendTo = Recv, nil
			}
			b.emit(ck, cl)
		})
	})
	return nil
}

// collnetChain compiles CollNetChain AllReduce (NCCL 2.30.7, paraphrased) with the network's
// in-network reduction (SHARP) as a switch endpoint. On every channel each node's ranks form a
// chain in the channel's ring order, its first rank the head. Lane 0 reduces up the chain (the
// last rank sends, the others recvReduceSend, the head to the network); the network reduces the
// heads' data and returns the result to every head; lane 1 broadcasts down the chain (the head
// receives from the network with the post-op, then recvCopySend down; the last rank receives).
func (b *builder) collnetChain(p *Plan, ck *chunking) error {
	nNodes := p.NNodes
	if nNodes < 1 {
		nNodes = 1
	}
	sw := b.switchOf(SwitchCollNet)
	elt := ck.elt
	offs, cnts := p.parts(p.Count, ck.align)
	for c := 0; c < p.nChannels(); c++ {
		chains := collnetChains(p, c, nNodes)
		heads := make([]int, nNodes)
		for node := range chains {
			heads[node] = chains[node][0]
		}
		part, cnt := offs[c], cnts[c]
		ci := 0
		for eo := int64(0); eo < cnt; eo += ck.chunkElems {
			ne := min64(ck.chunkElems, cnt-eo)
			o := (part + eo) * elt
			src, dst := &BufRef{Buf: BufSend, Offset: o}, &BufRef{Buf: BufRecv, Offset: o}
			for _, chain := range chains {
				for i, r := range chain {
					up := sw
					if i > 0 {
						up = chain[i-1]
					}
					down := -1
					if i+1 < len(chain) {
						down = chain[i+1]
					}
					if down < 0 {
						b.emit(ck, call{rank: r, ch: c, lane: 0, prim: Send, sendTo: []int{up}, connIdx: connUp, src: src, nelem: ne, chunk: ci})
					} else {
						b.emit(ck, call{rank: r, ch: c, lane: 0, prim: RecvReduceSend, recvFrom: []int{down}, sendTo: []int{up}, connIdx: connUp, src: src, nelem: ne, chunk: ci})
					}
				}
			}
			b.emit(ck, call{rank: sw, ch: c, prim: RecvReduceForward, recvFrom: heads, sendTo: heads, connIdx: connUp,
				sendIdx: connDown, hasSendIdx: true, nelem: ne, chunk: ci})
			for _, chain := range chains {
				for i, r := range chain {
					up := sw
					if i > 0 {
						up = chain[i-1]
					}
					cl := call{rank: r, ch: c, lane: 1, recvFrom: []int{up}, connIdx: connDown, dst: dst, nelem: ne, chunk: ci, postOp: i == 0}
					if i+1 < len(chain) {
						cl.prim, cl.sendTo = RecvCopySend, []int{chain[i+1]}
					} else {
						cl.prim = Recv
					}
					b.emit(ck, cl)
				}
			}
			ci++
		}
	}
	return nil
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// collnetChains are channel c's chains: each node's ranks in the channel's ring order, starting
// where the ring enters the node (the chain's head).
func collnetChains(p *Plan, c, nNodes int) [][]int {
	n := p.NRanks
	ppn := n / nNodes
	ring := p.ring(c)
	chains := make([][]int, nNodes)
	for i := range ring {
		r := ring[i]
		node := r / ppn
		chains[node] = append(chains[node], r)
	}
	for node, ch := range chains {
		// Rotate so the chain starts at the rank whose ring predecessor is on another node.
		for i, r := range ch {
			pos := indexOf(ring, r)
			if prev := ring[(pos-1+n)%n]; prev/ppn != node || ppn == n {
				chains[node] = append(append([]int(nil), ch[i:]...), ch[:i]...)
				break
			}
		}
	}
	return chains
}
