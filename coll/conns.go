package coll

import "sort"

// Connections lists the connections plan p uses — NCCL's connectors (channel, sender, receiver,
// connIndex) that it sets up, and allocates buffers for, before it can run the plan — without
// compiling the plan's steps, so that it answers for any communicator size (a ring's schedule
// grows as ranks², its connections as ranks). For a plan whose count puts data on every channel it
// is exactly the set of Schedule.Conns Compile(p) opens (TestConnectionsMatchCompile), with two
// differences that follow NCCL: ring collectives connect the whole ring on every channel of the
// plan (a Broadcast or Reduce schedule leaves the hop into its root unused, an empty channel
// nothing), and the Messages field is 0. Switch endpoints are numbered as Compile numbers them
// for p alone (NRanks + node for NVLS, NRanks for CollNet). The result is sorted by channel,
// sender, receiver and connIndex, and IDs are positions in it.
func Connections(p *Plan) ([]Conn, error) {
	if err := p.checkArgs(); err != nil {
		return nil, err
	}
	n := p.NRanks
	nch := p.channelSpan()
	set := map[connKey]bool{}
	add := func(c, from, to, idx int) {
		if from != to {
			set[connKey{p.ChannelLo + c, from, to, idx}] = true
		}
	}
	if n > 1 {
		switch {
		case p.Func == SendRecv || p.Func == AllToAll:
			elt := int64(p.DataType.Size())
			align := max64(16/elt, 1)
			for _, m := range p2pMessages(p) {
				if m.from == m.to {
					continue
				}
				if m.nch == 0 {
					m.nch = p.nChannels()
				}
				for _, c := range m.channels(n, nch, align) {
					add(c, m.from, m.to, 1)
				}
			}
		case p.Algo == Ring:
			for c := 0; c < nch; c++ {
				ring := p.ring(c)
				for i, r := range ring {
					add(c, r, ring[(i+1)%n], 0)
				}
			}
		case p.Algo == Tree:
			trees := p.Trees
			for c := 0; c < nch; c++ {
				var t ChannelTree
				if trees != nil {
					t = trees[p.ChannelLo+c]
				} else {
					bt, err := BuildTrees([][]int{{0}}, n, 1, PatternBalancedTree)
					if err != nil {
						return nil, err
					}
					t = bt[(p.ChannelLo+c)%2]
				}
				for r := 0; r < n; r++ {
					if up := t.Up[r]; up >= 0 {
						add(c, r, up, 0)
						add(c, up, r, 0)
					}
				}
			}
		case p.Algo == PAT:
			for c := 0; c < nch; c++ {
				for r := 0; r < n; r++ {
					for d := 1; d < n; d <<= 1 {
						if p.Func == AllGather {
							add(c, r, (r+d)%n, 0)
						} else {
							add(c, r, ((r-d)%n+n)%n, 0)
						}
					}
				}
			}
		case p.Algo == NVLS:
			sw := n
			for c := 0; c < nch; c++ {
				for r := 0; r < n; r++ {
					switch p.Func {
					case AllReduce:
						add(c, r, sw, connUp)
						add(c, sw, r, connUp)
						add(c, r, sw, connDown)
						add(c, sw, r, connDown)
					default: // AllGather, ReduceScatter
						add(c, r, sw, connUp)
						add(c, sw, r, connDown)
					}
				}
			}
		case p.Algo == NVLSTree:
			nNodes := max(1, p.NNodes)
			ppn := n / nNodes
			for c := 0; c < nch; c++ {
				for node := 0; node < nNodes; node++ {
					sw := n + node
					up, ds := p.nodeTree(c, node)
					for j := 0; j < ppn; j++ {
						r, head := node*ppn+j, node*ppn+j
						add(c, r, sw, connUp)   // scatter to the node's switch
						add(c, sw, r, connDown) // multicast of the result
						add(c, sw, head, connUp)
						if up >= 0 {
							add(c, head, up*ppn+j, connUp)
							add(c, up*ppn+j, head, connDown)
							add(c, head, sw, connDown)
						} else {
							add(c, head, sw, connDown)
						}
						for _, d := range ds {
							add(c, d*ppn+j, head, connUp)
							add(c, head, d*ppn+j, connDown)
						}
					}
				}
			}
		case p.Algo == CollNetChain:
			nNodes := max(1, p.NNodes)
			sw := n
			for c := 0; c < nch; c++ {
				for _, chain := range collnetChains(p, c, nNodes) {
					for i, r := range chain {
						up := sw
						if i > 0 {
							up = chain[i-1]
						}
						add(c, r, up, connUp)
						add(c, up, r, connDown)
					}
				}
			}
		default:
			return nil, ErrUnsupported
		}
	}
	out := make([]Conn, 0, len(set))
	for k := range set {
		out = append(out, Conn{Channel: k.ch, From: k.from, To: k.to, ConnIndex: k.idx})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Channel != b.Channel {
			return a.Channel < b.Channel
		}
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		return a.ConnIndex < b.ConnIndex
	})
	for i := range out {
		out[i].ID = i
	}
	return out, nil
}
