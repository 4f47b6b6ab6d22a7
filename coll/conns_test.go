package coll

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Connections is the set of connections Compile opens, for every algorithm, on plans whose count
// fills every channel (and, for rings, whole rings: AllReduce, AllGather, ReduceScatter).
func TestConnectionsMatchCompile(t *testing.T) {
	rings4 := [][]int{{0, 1, 2, 3}, {0, 2, 1, 3}, {3, 2, 1, 0}}
	trees8, err := BuildTrees([][]int{{0, 1, 2, 3}, {0, 1, 2, 3}}, 2, 4, PatternBalancedTree)
	require.NoError(t, err)
	for _, p := range []Plan{
		{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 4, Count: 4096, NChannels: 3, Rings: rings4},
		{Func: AllGather, Algo: Ring, Proto: LL, NRanks: 4, Count: 1000, NChannels: 3, Rings: rings4},
		{Func: ReduceScatter, Algo: Ring, Proto: LL128, NRanks: 5, Count: 999, NChannels: 2},
		{Func: AllReduce, Algo: Tree, Proto: Simple, NRanks: 8, NNodes: 2, Count: 1 << 16, NChannels: 4, Trees: trees8},
		{Func: AllReduce, Algo: Tree, Proto: LL, NRanks: 7, Count: 4096, NChannels: 2},
		{Func: AllGather, Algo: PAT, Proto: Simple, NRanks: 6, Count: 4096, NChannels: 2},
		{Func: ReduceScatter, Algo: PAT, Proto: Simple, NRanks: 5, Count: 4096, NChannels: 1},
		{Func: AllReduce, Algo: NVLS, Proto: Simple, NRanks: 4, Count: 1 << 16, NChannels: 2},
		{Func: AllGather, Algo: NVLS, Proto: Simple, NRanks: 4, Count: 4096, NChannels: 2},
		{Func: ReduceScatter, Algo: NVLS, Proto: Simple, NRanks: 3, Count: 4096, NChannels: 2},
		{Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 12, NNodes: 3, Count: 1 << 16, NChannels: 2},
		{Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 8, NNodes: 4, Count: 1 << 16, NChannels: 2, NodeTrees: starTrees},
		{Func: AllReduce, Algo: CollNetChain, Proto: Simple, NRanks: 8, NNodes: 2, Count: 1 << 16, NChannels: 2},
		{Func: SendRecv, Proto: Simple, NRanks: 5, Count: 1 << 14, NChannels: 4, Peer: 2},
		{Func: AllToAll, Proto: LL, NRanks: 4, Count: 4096, NChannels: 8},
		{Func: SendRecv, Proto: Simple, NRanks: 4, NChannels: 4, Transfers: []Transfer{
			{From: 0, To: 3, Count: 100000, NChannels: 2}, {From: 3, To: 0, Count: 5}, {From: 1, To: 1, Count: 8}}},
	} {
		t.Run(fmt.Sprintf("%v_%v_%v_n%d", p.Func, p.Algo, p.Proto, p.NRanks), func(t *testing.T) {
			if p.DataType == 0 {
				p.DataType = Float32
			}
			s, err := Compile(p)
			require.NoError(t, err)
			got, err := Connections(&p)
			require.NoError(t, err)
			key := func(c Conn) string { return fmt.Sprintf("ch%d %d->%d idx%d", c.Channel, c.From, c.To, c.ConnIndex) }
			want := map[string]bool{}
			for _, c := range s.Conns {
				want[key(c)] = true
			}
			have := map[string]bool{}
			for _, c := range got {
				have[key(c)] = true
			}
			require.Equal(t, want, have)
		})
	}
}

// Broadcast and Reduce rings connect every hop, as NCCL connects rings; their schedules use all
// but the hop into the root.
func TestConnectionsWholeRing(t *testing.T) {
	p := Plan{Func: Broadcast, Algo: Ring, Proto: Simple, NRanks: 4, Count: 4096, NChannels: 2, Root: 2, DataType: Float32}
	got, err := Connections(&p)
	require.NoError(t, err)
	require.Len(t, got, 8)
	s, err := Compile(p)
	require.NoError(t, err)
	require.Len(t, s.Conns, 6)
}

// Point-to-point channels (coll.P2PChannels, what Compile and Connections use): the round of
// ring distance d starts at channel d and spreads a transfer's parts bit-reversed, so that when
// nRanks × parts fits in the p2p channels the rounds of an all-to-all use disjoint channels, and
// every transfer's parts are distinct channels.
func TestP2PChannels(t *testing.T) {
	require.Equal(t, []int{3, 7, 5, 9 % 8}, P2PChannels(3, 8, 4))
	for _, c := range []struct{ n, nch, k int }{{8, 32, 4}, {4, 8, 2}, {16, 16, 1}} {
		used := map[int]int{}
		for d := 0; d < c.n; d++ {
			chs := P2PChannels(d, c.nch, c.k)
			require.Len(t, chs, c.k)
			seen := map[int]bool{}
			for _, ch := range chs {
				require.False(t, seen[ch], "transfer at distance %d uses channel %d twice", d, ch)
				seen[ch] = true
				used[ch]++
			}
		}
		if c.n*c.k <= c.nch {
			for ch, u := range used {
				require.Equal(t, 1, u, "%+v: channel %d used by %d rounds", c, ch, u)
			}
		}
	}
}

// starTrees: node 0 the root of nodes 1, 2 and 3 in both trees, child 3 loose.
var starTrees = []ChannelTree{
	{Up: []int{-1, 0, 0, 0}, Down: [][]int{{1, 2, 3}, nil, nil, nil}, Loose: [][]int{{3}, nil, nil, nil}},
	{Up: []int{-1, 0, 0, 0}, Down: [][]int{{1, 2, 3}, nil, nil, nil}, Loose: [][]int{{3}, nil, nil, nil}},
}

// NodeTrees that are NCCL's double binary tree compile to the schedule without them; a loose
// child must be a child.
func TestNodeTrees(t *testing.T) {
	p := Plan{Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 20, NNodes: 5, Count: 1 << 16, NChannels: 2, DataType: Float32}
	want, err := Compile(p)
	require.NoError(t, err)
	for c := 0; c < 2; c++ {
		ct := ChannelTree{Up: make([]int, 5), Down: make([][]int, 5)}
		for n := 0; n < 5; n++ {
			up, d0, d1, _ := Dtree(5, n, c)
			ct.Up[n] = up
			for _, d := range []int{d0, d1} {
				if d >= 0 {
					ct.Down[n] = append(ct.Down[n], d)
				}
			}
		}
		p.NodeTrees = append(p.NodeTrees, ct)
	}
	got, err := Compile(p)
	require.NoError(t, err)
	require.Equal(t, want, got)
	q := Plan{Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 8, NNodes: 4, Count: 1 << 16, NChannels: 2, DataType: Float32,
		NodeTrees: []ChannelTree{starTrees[0], {Up: starTrees[1].Up, Down: starTrees[1].Down, Loose: [][]int{nil, {2}, nil, nil}}}}
	_, err = Compile(q)
	require.ErrorContains(t, err, "loose child 2 is no child")
}
