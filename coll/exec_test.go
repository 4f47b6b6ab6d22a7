package coll

import (
	"errors"
	"fmt"
	"testing"
)

// inputs fills every rank's send buffer with small integers (exact in float64 for every reduction).
func inputs(p *Plan, op *Op, r int) []float64 {
	elt := int64(p.DataType.Size())
	v := make([]float64, op.SendBytes/elt)
	for i := range v {
		if p.Op == Prod {
			v[i] = float64(1 + (r+i)%2)
		} else {
			v[i] = float64((r+1)*3 + i%17 - 8)
		}
	}
	return v
}

const sentinel = -12345

// reference is the collective's definition (Reference) for the inputs ins (values of
// p.DataType). Execute takes PreMulSum with a scalar of 1.
func reference(p *Plan, ins [][]float64) *Reference {
	dt := p.DataType
	send := make([][]byte, len(ins))
	for r, in := range ins {
		send[r] = make([]byte, len(in)*dt.Size())
		for i, v := range in {
			dt.SetValue(send[r], i, v)
		}
	}
	ref, err := NewReference(p, 1, send)
	if err != nil {
		panic(err) // a broken test table, not a data error
	}
	return ref
}

// mismatch compares rank r's receive buffer (values, as Execute leaves them) with the reference,
// and the sentinel where the collective writes nothing; it describes the first difference, or
// returns "".
func mismatch(ref *Reference, dt DataType, r int, got []float64) string {
	for i := range ref.RecvCount() {
		switch e, ok := ref.Want(r, i); {
		case !ok && got[i] != sentinel:
			return fmt.Sprintf("rank %d element %d: got %v, want the sentinel (not written)", r, i, got[i])
		case ok && !e.Holds(dt, dt.FromFloat(got[i])):
			return fmt.Sprintf("rank %d element %d: got %v want %s", r, i, got[i], e.Describe(dt))
		}
	}
	return ""
}

// expectedSent is how many payload bytes each rank must send by the collective's definition (and
// the algorithm's shape where the definition leaves a choice, e.g. which rank forwards).
func expectedSent(p *Plan, s *Schedule) (perRank []int64, total int64) {
	n := int64(p.NRanks)
	S := p.Count * int64(p.DataType.Size())
	perRank = make([]int64, n)
	if n == 1 {
		return perRank, 0
	}
	switch {
	case p.Algo == NVLS && p.Func == AllGather:
		for r := range perRank {
			perRank[r] = S // each block goes to the switch once, which multicasts it
		}
		return perRank, n * S
	case p.Algo == NVLS && p.Func == ReduceScatter:
		for r := range perRank {
			perRank[r] = n * S // every block to the switch, which reduces it
		}
		return perRank, n * n * S
	case p.Algo == NVLS && p.Func == AllReduce && p.NNodes > 1:
		// Every rank scatters the buffer to its switch; each node's heads send each reduced chunk
		// to the network and the network's result to their switch.
		nn := int64(p.NNodes)
		return nil, n*S + 2*nn*S
	case p.Algo == NVLS && p.Func == AllReduce:
		// Every rank scatters the buffer to the switch; the heads send each reduced chunk back once.
		return nil, (n + 1) * S
	case p.Algo == NVLSTree:
		// Scatter n·S; heads send each chunk up and down every inter-node edge and to their switch.
		nn := int64(max(1, p.NNodes))
		return nil, n*S + 2*(nn-1)*S + nn*S
	case (p.Algo == CollNetChain || p.Algo == CollNetDirect) && p.Func == AllReduce:
		// Chain: the chain carries S up and down over ppn−1 links and the head sends S to the
		// network. Direct: ppn−1 ranks send each head its part, the heads send S to the network and
		// send the result back to ppn−1 ranks. Both (2·ppn − 1)·S a node.
		// Each node: the chain carries S up and down over ppn−1 links, the head sends S to the network.
		nn := int64(max(1, p.NNodes))
		return nil, (2*n - nn) * S
	}
	switch p.Func {
	case AllReduce:
		// Ring: every chunk crosses n−1 links reducing and n−1 links gathering; tree: every edge
		// carries the buffer up and down once.
		return nil, 2 * (n - 1) * S
	case AllGather, ReduceScatter, AllToAll:
		for r := range perRank {
			perRank[r] = (n - 1) * S
		}
		return perRank, n * (n - 1) * S
	case Broadcast, Reduce:
		return nil, (n - 1) * S
	case SendRecv:
		for r := range perRank {
			if (p.Peer % int(n)) != 0 {
				perRank[r] = S
			}
		}
		return perRank, 0
	}
	return nil, 0
}

func runPlan(t *testing.T, p Plan, opt ExecOptions) (*Schedule, *ExecStats) {
	t.Helper()
	name := fmt.Sprintf("%v/%v n=%d count=%d nch=%d %v %v chunk=%d opt=%+v", p.Func, p.Algo, p.NRanks, p.Count, p.NChannels, p.Proto, p.Op, p.ChunkSize, opt)
	s, err := Compile(p)
	if err != nil {
		t.Fatalf("%s: Compile: %v", name, err)
	}
	op := &s.Ops[0]
	elt := int64(p.DataType.Size())
	bufs := make([]Buffers, p.NRanks)
	ins := make([][]float64, p.NRanks)
	inPlace := opt.InPlace
	for r := range bufs {
		ins[r] = inputs(&p, op, r)
		if inPlace {
			b := make([]float64, op.InPlaceBytes()/elt)
			for i := range b {
				b[i] = sentinel
			}
			so, _ := op.InPlaceOffsets(r)
			copy(b[so/elt:], ins[r])
			bufs[r] = Buffers{Recv: b}
		} else {
			rb := make([]float64, op.RecvBytes/elt)
			for i := range rb {
				rb[i] = sentinel
			}
			bufs[r] = Buffers{Send: append([]float64(nil), ins[r]...), Recv: rb}
		}
	}
	st, err := Execute(s, [][]Buffers{bufs}, opt)
	if err != nil {
		t.Fatalf("%s: Execute: %v", name, err)
	}
	ref := reference(&p, ins)
	for r := range bufs {
		got := bufs[r].Recv
		if inPlace {
			_, ro := op.InPlaceOffsets(r)
			got = got[ro/elt : ro/elt+op.RecvBytes/elt]
			if p.Func == Reduce && r != p.Root {
				continue // in place, a non-root's buffer holds its input
			}
		}
		if m := mismatch(ref, p.DataType, r, got); m != "" {
			t.Fatalf("%s: %s", name, m)
		}
	}
	return s, st
}

func TestCollectivesMatchDefinition(t *testing.T) {
	type combo struct {
		f     Func
		a     Algo
		nodes bool // several nodes (NVLS across nodes: with CollNet)
	}
	combos := []combo{
		{f: AllReduce, a: Ring}, {f: AllGather, a: Ring}, {f: ReduceScatter, a: Ring},
		{f: Broadcast, a: Ring}, {f: Reduce, a: Ring}, {f: AllReduce, a: Tree},
		{f: AllToAll, a: Ring}, {f: SendRecv, a: Ring},
		{f: AllGather, a: PAT}, {f: ReduceScatter, a: PAT},
		{f: AllReduce, a: NVLS}, {f: AllReduce, a: CollNetChain},
		{f: AllGather, a: NVLS}, {f: ReduceScatter, a: NVLS}, {f: AllReduce, a: NVLSTree},
		{f: AllReduce, a: NVLS, nodes: true}, {f: AllReduce, a: CollNetDirect, nodes: true},
	}
	counts := []int64{0, 1, 7, 131, 1003}
	ops := []RedOp{Sum, Prod, Max, Min, Avg}
	runs := 0
	for _, cb := range combos {
		for n := 1; n <= 9; n++ {
			for _, count := range counts {
				for nch := 1; nch <= 4; nch++ {
					for proto := Proto(0); proto < NumProtos; proto++ {
						if proto == LL128 && (cb.f == SendRecv || cb.f == AllToAll) {
							continue
						}
						if NeedsSwitches(cb.f, cb.a) && proto != Simple {
							continue
						}
						// Small chunks (in bytes) so that a few hundred elements span many chunks and loops.
						chunk := []int64{0, 64, 48}[int(proto)]
						if proto == LL128 {
							chunk = 0
						}
						p := Plan{Func: cb.f, Algo: cb.a, Proto: proto, NRanks: n, Count: count, DataType: Float32,
							Op: ops[(n+int(count))%len(ops)], Root: (n * 5) % n, NChannels: nch, ChunkSize: chunk, Peer: 1 + n%3}
						if cb.a == CollNetChain || cb.a == NVLSTree || cb.nodes {
							p.NNodes = n
							for _, d := range []int{3, 2} {
								if n%d == 0 && n > d {
									p.NNodes = d
									break
								}
							}
						}
						if proto == Simple {
							// A small Simple buffer so that ring slices and credits come into play.
							p.BuffSize[Simple] = 8 * 512
						}
						name := fmt.Sprintf("%v/%v/n%d/nodes%d/c%d/ch%d/%v", cb.f, cb.a, n, p.NNodes, count, nch, proto)
						opt := ExecOptions{InPlace: (n+nch)%2 == 0 && cb.f < SendRecv, Sequential: (int(count)+nch)%2 == 1}
						s, st := runPlan(t, p, opt)
						runs++
						per, total := expectedSent(&p, s)
						var sum int64
						for r, rs := range st.Ranks[:n] {
							sum += rs.SentBytes
							if per != nil && rs.SentBytes != per[r] {
								t.Fatalf("%s: rank %d sent %d bytes, want %d", name, r, rs.SentBytes, per[r])
							}
							if proto == Simple && rs.SentWire != rs.SentBytes {
								t.Fatalf("%s: Simple wire %d != payload %d", name, rs.SentWire, rs.SentBytes)
							}
							if rs.SentWire < rs.SentBytes {
								t.Fatalf("%s: wire %d < payload %d", name, rs.SentWire, rs.SentBytes)
							}
						}
						if total != 0 && sum != total {
							t.Fatalf("%s: ranks sent %d bytes in all, want %d", name, sum, total)
						}
						var recv, swSent, swRecv int64
						for _, rs := range st.Ranks[:n] {
							recv += rs.RecvBytes
						}
						for _, rs := range st.Ranks[n:] {
							swSent += rs.SentBytes
							swRecv += rs.RecvBytes
						}
						if recv+swRecv != sum+swSent {
							t.Fatalf("%s: received %d bytes, sent %d", name, recv, sum)
						}
					}
				}
			}
		}
	}
	t.Logf("%d schedules executed and checked", runs)
}

// TestRingAllReducePerRankBytes: with a count that divides evenly, every rank sends exactly
// 2(n−1)/n of the buffer (nccl-tests 2.19's bus bandwidth factor, all_reduce.cu).
func TestRingAllReducePerRankBytes(t *testing.T) {
	for n := 2; n <= 9; n++ {
		count := int64(n * 4 * 1024)
		p := Plan{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: n, Count: count, DataType: Float32, NChannels: 2}
		_, st := runPlan(t, p, ExecOptions{})
		want := 2 * int64(n-1) * count * 4 / int64(n)
		for r, rs := range st.Ranks {
			if rs.SentBytes != want || rs.RecvBytes != want {
				t.Errorf("n=%d rank %d: sent %d received %d, want %d", n, r, rs.SentBytes, rs.RecvBytes, want)
			}
		}
	}
}

// TestTreeAllReducePerRankBytes: each rank sends the buffer once up and once down to each child.
func TestTreeAllReducePerRankBytes(t *testing.T) {
	for n := 2; n <= 9; n++ {
		count := int64(3000)
		p := Plan{Func: AllReduce, Algo: Tree, Proto: Simple, NRanks: n, Count: count, DataType: Float64, NChannels: 1, ChunkSize: 1024}
		s, st := runPlan(t, p, ExecOptions{})
		_ = s
		tr, _ := BuildTrees([][]int{{0}}, n, 1, PatternBalancedTree)
		for r, rs := range st.Ranks {
			k := int64(len(tr[0].Down[r]))
			if tr[0].Up[r] >= 0 {
				k++
			}
			if want := k * count * 8; rs.SentBytes != want {
				t.Errorf("n=%d rank %d sent %d, want %d", n, r, rs.SentBytes, want)
			}
		}
	}
}

// TestMessageCountMatchesProxySteps checks Ring Simple against NCCL's proxy step count (NCCL 2.30.7
// calcCollChunking): per channel nsteps = stepsPerLoop × loops × chunkSteps, posted sliceSteps at a
// time.
func TestMessageCountMatchesProxySteps(t *testing.T) {
	for _, f := range []Func{AllReduce, AllGather, ReduceScatter, Broadcast} {
		for _, n := range []int{2, 3, 8} {
			for _, mib := range []int64{1, 13, 64} {
				nch := 2
				count := mib << 20 / 4
				if f == AllGather || f == ReduceScatter {
					count /= int64(n)
				}
				p := Plan{Func: f, Algo: Ring, Proto: Simple, NRanks: n, Count: count, DataType: Float32, NChannels: nch}
				s, err := Compile(p)
				if err != nil {
					t.Fatal(err)
				}
				cs, ss := RingChunkSteps(f, Ring, Simple)
				chunk := DefaultChunkSize(f, Ring, Simple, 0)
				var stepsPerLoop, chunksPerLoop int64 = int64(n - 1), int64(n)
				switch f {
				case AllReduce:
					stepsPerLoop = int64(2 * (n - 1))
				case Broadcast:
					stepsPerLoop, chunksPerLoop = 1, 1
				}
				bytes := count * 4
				if f == AllGather || f == ReduceScatter {
					bytes *= int64(n)
				}
				loops := divUp(bytes, int64(nch)*chunksPerLoop*chunk)
				want := stepsPerLoop * loops * int64(cs) / int64(ss)
				// The root's predecessor in the Broadcast chain sends nothing, so count receives.
				for c := 0; c < nch; c++ {
					got := 0
					for _, st := range s.Program(1, c).Steps {
						got += len(st.Recv)
					}
					if int64(got) != want {
						t.Errorf("%v n=%d %dMiB channel %d: %d messages received by rank 1, proxy formula says %d", f, n, mib, c, got, want)
					}
				}
			}
		}
	}
}

func TestDeadlockIsReported(t *testing.T) {
	// Two ranks that both receive before sending.
	s := &Schedule{NRanks: 2, NChannels: 1, Ops: []Op{{Func: SendRecv, DataType: Float32, SendBytes: 4, RecvBytes: 4}},
		Conns: []Conn{{ID: 0, From: 0, To: 1, Messages: 1}, {ID: 1, From: 1, To: 0, Messages: 1}}}
	for r := 0; r < 2; r++ {
		in, out := 1-r, r
		s.Programs = append(s.Programs, Program{Rank: r, Steps: []Step{
			{Index: 0, Prim: Recv, Recv: []Xfer{{Conn: int32(in), Peer: int32(1 - r), CreditSeq: -1}}, Dst: &BufRef{Buf: BufRecv}, Bytes: 4},
			{Index: 1, Prim: Send, Deps: []int{0}, Send: []Xfer{{Conn: int32(out), Peer: int32(1 - r), CreditSeq: -1}}, Src: &BufRef{Buf: BufSend}, Bytes: 4},
		}})
	}
	bufs := [][]Buffers{{{Send: []float64{1}, Recv: []float64{0}}, {Send: []float64{2}, Recv: []float64{0}}}}
	_, err := Execute(s, bufs, ExecOptions{})
	if !errors.Is(err, ErrDeadlock) {
		t.Fatalf("want deadlock, got %v", err)
	}
	t.Log(err)
}

func TestGroup(t *testing.T) {
	n := 5
	plans := []Plan{
		{Func: AllReduce, Algo: Tree, Proto: LL, NRanks: n, Count: 999, DataType: Float32, NChannels: 2, ChunkSize: 256},
		{Func: AllGather, Algo: Ring, Proto: Simple, NRanks: n, Count: 333, DataType: Int32, NChannels: 3, ChunkSize: 512,
			ChannelLo: 2, Parts: []int64{300, 0, 33}},
		{Func: AllReduce, Algo: Ring, Proto: LL128, NRanks: n, Count: 4000, DataType: Float64, Op: Max, NChannels: 1},
		{Func: SendRecv, NRanks: n, Count: 100, DataType: Float32, Proto: Simple, NChannels: 4, Transfers: []Transfer{
			{From: 0, To: 3, Count: 10, NChannels: 1, LL: true}, {From: 3, To: 0, Count: 20, NChannels: 2, ChunkSize: 16},
			{From: 2, To: 2, Count: 5}, {From: 1, To: 4, Count: 0}}},
	}
	s, err := Compile(plans...)
	if err != nil {
		t.Fatal(err)
	}
	// Rank 1's channel 3 carries no AllGather data (its part is empty), only the empty send to
	// rank 4 (ring distance 3: p2p round 3 starts at channel 3).
	if st := s.Program(1, 3).Steps; s.NChannels != 5 || len(s.Program(1, 4).Steps) == 0 || len(st) != 1 || st[0].Prim != Send || st[0].Bytes != 0 {
		t.Errorf("channel range: %d channels, channel 4 %d steps, channel 3 %v (want 5, >0, one empty send)",
			s.NChannels, len(s.Program(1, 4).Steps), st)
	}
	bufs := make([][]Buffers, len(plans))
	ins := make([][][]float64, len(plans))
	for o := range plans {
		op := &s.Ops[o]
		elt := int64(op.DataType.Size())
		bufs[o] = make([]Buffers, n)
		ins[o] = make([][]float64, n)
		for r := 0; r < n; r++ {
			ins[o][r] = inputs(&plans[o], op, r)
			rb := make([]float64, op.RecvBytes/elt)
			for i := range rb {
				rb[i] = sentinel
			}
			bufs[o][r] = Buffers{Send: append([]float64(nil), ins[o][r]...), Recv: rb}
		}
	}
	if _, err := Execute(s, bufs, ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	for o := range plans {
		ref := reference(&plans[o], ins[o])
		for r := 0; r < n; r++ {
			if m := mismatch(ref, plans[o].DataType, r, bufs[o][r].Recv); m != "" {
				t.Fatalf("op %d: %s", o, m)
			}
		}
	}
	// Transfers: rank 3 receives 10 elements from rank 0; rank 0 receives 20 from rank 3; rank 2 copies 5.
	check := func(to, from int, recvOff, sendOff, cnt int) {
		for i := 0; i < cnt; i++ {
			if got, want := bufs[3][to].Recv[recvOff+i], ins[3][from][sendOff+i]; got != want {
				t.Fatalf("transfer %d→%d element %d: got %v want %v", from, to, i, got, want)
			}
		}
	}
	// Transfer 0→3 runs LL on one channel (distance 3 → channel 3); 3→0 Simple on two channels in
	// 16-byte chunks (20 floats: 2 parts of 12 and 8 elements, 3 + 2 messages).
	chans, msgs := map[int]bool{}, 0
	for c := 0; c < s.NChannels; c++ {
		for _, st := range s.Program(0, c).Steps {
			if st.Op == 3 && st.Prim == Send {
				if st.Proto != LL {
					t.Errorf("0→3 step on channel %d uses %v", c, st.Proto)
				}
				chans[c] = true
			}
		}
		for _, st := range s.Program(3, c).Steps {
			if st.Op == 3 && st.Prim == Send {
				msgs++
			}
		}
	}
	if len(chans) != 1 || !chans[3] || msgs != 5 {
		t.Errorf("0→3 on channels %v (want {3}); 3→0 in %d messages (want 5)", chans, msgs)
	}
	check(3, 0, 0, 0, 10)
	check(0, 3, 0, 0, 20)
	check(2, 2, 0, 0, 5)
}

func TestBadPlans(t *testing.T) {
	base := Plan{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 4, Count: 100, DataType: Float32}
	cases := map[string]func(p *Plan){
		"NRanks":    func(p *Plan) { p.NRanks = 0 },
		"count":     func(p *Plan) { p.Count = -1 },
		"NChannels": func(p *Plan) { p.NChannels = 65 },
		"root":      func(p *Plan) { p.Func = Broadcast; p.Root = 4 },
		"ring of channel 0": func(p *Plan) {
			p.Rings = [][]int{{0, 1, 1, 2}}
		},
		"unsupported":     func(p *Plan) { p.Algo = CollNetDirect; p.Func = AllGather },
		"CollNet heads":   func(p *Plan) { p.Algo = CollNetDirect; p.NNodes = 2; p.CollNetHeads = []int{0, 0} },
		"Simple only":     func(p *Plan) { p.Algo = CollNetChain; p.Proto = LL },
		"AllReduce only":  func(p *Plan) { p.Algo = NVLS; p.Func = AllGather; p.NNodes = 2 },
		"NNodes 3":        func(p *Plan) { p.NNodes = 3 },
		"parts sum":       func(p *Plan) { p.NChannels = 2; p.Parts = []int64{50, 40} },
		"channels 63..64": func(p *Plan) { p.NChannels = 2; p.ChannelLo = 63 },
		"data type":       func(p *Plan) { p.DataType = 99 },
		"steps":           func(p *Plan) { p.NRanks = 4096; p.Count = 1 << 30; p.ChunkSize = 512 },
	}
	for want, mod := range cases {
		p := base
		mod(&p)
		_, err := Compile(p)
		if err == nil || !containsStr(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || containsStr(s[1:], sub)))
}

// CollNetDirect with fewer heads than local ranks (NCCL's heads are the GPUs beside a NIC): the
// chunks of a loop go to the heads in turn, every result is right, and only heads talk to the
// network.
func TestCollNetDirectHeads(t *testing.T) {
	for _, heads := range [][]int{{1, 3}, {2}, {0, 1, 2, 3}} {
		p := Plan{Func: AllReduce, Algo: CollNetDirect, Proto: Simple, NRanks: 8, NNodes: 2, Count: 1003, DataType: Float32,
			Op: Avg, NChannels: 2, ChunkSize: 64, CollNetHeads: heads}
		s, _ := runPlan(t, p, ExecOptions{})
		for _, pr := range s.Programs {
			for _, st := range pr.Steps {
				for _, x := range st.Send {
					if int(x.Peer) >= s.NRanks && indexOf(heads, pr.Rank%4) < 0 {
						t.Fatalf("heads %v: rank %d sends to the network", heads, pr.Rank)
					}
				}
			}
		}
	}
}

// EstimatedSteps bounds what Compile makes for the switch algorithms (their estimate decides when
// a call is too large to compile and when the simulator extrapolates), and is not far above it.
func TestEstimatedStepsSwitches(t *testing.T) {
	for _, a := range []Algo{NVLSTree, CollNetChain, CollNetDirect, NVLS} {
		for _, c := range []struct {
			nodes, ppn, nch int
			count           int64
		}{{2, 8, 16, 1 << 20}, {4, 8, 16, 16 << 20}, {2, 4, 8, 3 << 20}} {
			p := Plan{Func: AllReduce, Algo: a, Proto: Simple, NRanks: c.nodes * c.ppn, NNodes: c.nodes, Count: c.count,
				DataType: Float32, NChannels: c.nch}
			s, err := Compile(p)
			if err != nil {
				t.Fatalf("%v %+v: %v", a, c, err)
			}
			steps := 0
			for _, pr := range s.Programs {
				steps += len(pr.Steps)
			}
			est := p.EstimatedSteps()
			if est < float64(steps) || est > 6*float64(steps) {
				t.Errorf("%v %+v: estimate %.0f for %d compiled steps", a, c, est, steps)
			}
		}
	}
}
