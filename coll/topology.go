package coll

import (
	"errors"
	"fmt"
	"sort"

	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// MaxTreeArity is NCCL_MAX_TREE_ARITY (NCCL 2.30.7 device.h): a tree rank has at most 3
// children (two nodes below plus the next rank of its node's chain).
const MaxTreeArity = 3

// TreePattern is the intra-node shape of a tree graph, numbered as NCCL_TOPO_PATTERN_* (NCCL 2.30.7,
// graph.h): BalancedTree 1, SplitTree 2, Tree 3.
type TreePattern int

const (
	PatternBalancedTree TreePattern = 1
	PatternSplitTree    TreePattern = 2
	PatternTree         TreePattern = 3
)

// Btree is NCCL's in-order binary tree over n nodes rooted at 0 (ncclGetBtree, NCCL 2.30.7
// trees.cc), for node r: its parent (−1 at the root), its two children (−1 where absent: d0 is the
// lower child, attached to the parent's child0 rank, d1 the higher one) and its child type (0 if r
// is below its parent, else 1; −1 at the root).
func Btree(n, r int) (up, d0, d1, childType int) {
	bit := 1
	for bit < n && bit&r == 0 {
		bit <<= 1
	}
	if r == 0 {
		// The root has a single child, the highest power of two below n, in the d1 position.
		if n > 1 {
			return -1, -1, bit >> 1, -1
		}
		return -1, -1, -1, -1
	}
	up = (r ^ bit) | (bit << 1)
	if up >= n {
		up = r ^ bit
	}
	childType = 1
	if r < up {
		childType = 0
	}
	low := bit >> 1
	d0, d1 = -1, -1
	if low != 0 {
		d0 = r - low
		for low != 0 && r+low >= n {
			low >>= 1
		}
		if low != 0 {
			d1 = r + low
		}
	}
	return up, d0, d1, childType
}

// Dtree is NCCL's double binary tree (ncclGetDtree, NCCL 2.30.7 trees.cc): tree 0 is Btree;
// tree 1 mirrors it (node' = n−1−node) when n is even and shifts it by one (node' = node−1 mod n)
// when n is odd. It returns node r's links in tree t (0 or 1).
func Dtree(n, r, t int) (up, d0, d1, childType int) {
	if t == 0 {
		return Btree(n, r)
	}
	var m func(int) int
	var inv func(int) int
	if n%2 == 1 {
		m = func(x int) int { return (x - 1 + n) % n }
		inv = func(x int) int { return (x + 1) % n }
	} else {
		m = func(x int) int { return n - 1 - x }
		inv = m
	}
	u, a, b, ct := Btree(n, m(r))
	conv := func(x int) int {
		if x < 0 {
			return -1
		}
		return inv(x)
	}
	return conv(u), conv(a), conv(b), ct
}

// BuildRings builds every channel's ring over nNodes×ppn ranks (rank = node×ppn + local index) from
// each channel's intra-node chain in local indices, as NCCL's connectRings does (NCCL 2.30.7
// connect.cc): node n's last rank sends to node n+1's first rank, cyclically. With crossNic and an
// even channel count, odd nodes swap the chains of channel pairs (c, c^1) so consecutive nodes
// alternate NICs.
func BuildRings(chains [][]int, nNodes, ppn int, crossNic bool) ([][]int, error) {
	if nNodes < 1 || ppn < 1 {
		return nil, fmt.Errorf("coll: BuildRings: bad shape nNodes=%d ppn=%d", nNodes, ppn)
	}
	if len(chains) == 0 {
		return nil, fmt.Errorf("coll: BuildRings: no channels")
	}
	for c, ch := range chains {
		if err := checkPerm(ch, ppn); err != nil {
			return nil, fmt.Errorf("coll: BuildRings: channel %d chain: %w", c, err)
		}
	}
	swap := crossNic && len(chains)%2 == 0
	rings := make([][]int, len(chains))
	for c := range chains {
		ring := make([]int, 0, nNodes*ppn)
		for node := 0; node < nNodes; node++ {
			src := c
			if swap && node%2 == 1 {
				src = c ^ 1
			}
			for _, l := range chains[src] {
				ring = append(ring, node*ppn+l)
			}
		}
		rings[c] = ring
	}
	return rings, nil
}

// BuildTrees builds the tree channels over nNodes×ppn ranks (rank = node×ppn + local) as NCCL's
// connectTrees does (NCCL 2.30.7 connect.cc). chains[c] is channel c's intra-node chain in
// local indices (up = previous, down = next). The result has 2×len(chains) trees: channel c uses
// tree 0 of the double binary tree over nodes, its twin c+len(chains) tree 1. The pattern picks
// which ranks of a node link to the parent node and to the two child nodes.
func BuildTrees(chains [][]int, nNodes, ppn int, pattern TreePattern) ([]ChannelTree, error) {
	if nNodes < 1 || ppn < 1 {
		return nil, fmt.Errorf("coll: BuildTrees: bad shape nNodes=%d ppn=%d", nNodes, ppn)
	}
	if len(chains) == 0 {
		return nil, fmt.Errorf("coll: BuildTrees: no channels")
	}
	switch pattern {
	case PatternBalancedTree, PatternSplitTree, PatternTree:
	default:
		return nil, fmt.Errorf("coll: BuildTrees: unknown tree pattern %d (want 1 balanced, 2 split, 3 tree)", int(pattern))
	}
	for c, ch := range chains {
		if err := checkPerm(ch, ppn); err != nil {
			return nil, fmt.Errorf("coll: BuildTrees: channel %d chain: %w", c, err)
		}
	}
	n := nNodes * ppn
	nc := len(chains)
	trees := make([]ChannelTree, 2*nc)
	for c := 0; c < nc; c++ {
		chain := chains[c]
		at := func(node, i int) int {
			if i >= len(chain) {
				i = 0
			}
			return node*ppn + chain[i]
		}
		// Special ranks per node (connectTrees' treeToParent, treeToChild0, treeToChild1).
		toParent := func(node int) int { return at(node, 0) }
		toChild0 := func(node int) int {
			if pattern == PatternTree {
				return at(node, 0)
			}
			return at(node, 1)
		}
		toChild1 := func(node int) int {
			if pattern == PatternSplitTree {
				return at(node, 1)
			}
			return at(node, 0)
		}
		for t := 0; t < 2; t++ {
			tr := ChannelTree{Up: make([]int, n), Down: make([][]int, n)}
			for r := range tr.Up {
				tr.Up[r] = -1
			}
			for node := 0; node < nNodes; node++ {
				for i := range chain {
					r := at(node, i)
					if i > 0 {
						tr.Up[r] = at(node, i-1)
					}
					if i+1 < len(chain) {
						tr.Down[r] = append(tr.Down[r], at(node, i+1))
					}
				}
				up, d0, d1, ct := Dtree(nNodes, node, t)
				if up >= 0 {
					if ct == 0 {
						tr.Up[toParent(node)] = toChild0(up)
					} else {
						tr.Up[toParent(node)] = toChild1(up)
					}
				}
				if d0 >= 0 {
					r := toChild0(node)
					tr.Down[r] = append(tr.Down[r], toParent(d0))
				}
				if d1 >= 0 {
					r := toChild1(node)
					tr.Down[r] = append(tr.Down[r], toParent(d1))
				}
			}
			if err := CheckTree(tr); err != nil {
				return nil, fmt.Errorf("coll: BuildTrees: channel %d tree %d: %w", c, t, err)
			}
			trees[c+t*nc] = tr
		}
	}
	return trees, nil
}

// CheckTree verifies that a tree's Up and Down links agree, that there is exactly one root, that
// every rank reaches it without a cycle and that no rank has more than MaxTreeArity children.
func CheckTree(t ChannelTree) error { return checkTree(t, MaxTreeArity) }

// checkTree is CheckTree with at most arity children per rank (0: any number).
func checkTree(t ChannelTree, arity int) error {
	n := len(t.Up)
	if len(t.Down) != n {
		return fmt.Errorf("tree has %d up links but %d down lists", n, len(t.Down))
	}
	roots := 0
	for r := 0; r < n; r++ {
		u := t.Up[r]
		if u == -1 {
			roots++
		} else if u < 0 || u >= n || u == r {
			return fmt.Errorf("rank %d: bad parent %d", r, u)
		} else if !contains(t.Down[u], r) {
			return fmt.Errorf("rank %d has parent %d, which does not list it as a child", r, u)
		}
		if arity > 0 && len(t.Down[r]) > arity {
			return fmt.Errorf("rank %d has %d children (max %d)", r, len(t.Down[r]), arity)
		}
		for _, d := range t.Down[r] {
			if d < 0 || d >= n || t.Up[d] != r {
				return fmt.Errorf("rank %d lists child %d, whose parent is not %d", r, d, r)
			}
		}
	}
	if roots != 1 {
		return fmt.Errorf("tree has %d roots (want 1)", roots)
	}
	// One root and consistent links may still hide a cycle of ranks that are each other's
	// ancestors, away from the root: the child→parent graph must sort topologically. Every
	// rank reaching the root up its parents says it does; else the sort names the cycle.
	if reachesRoot(t.Up) {
		return nil
	}
	g := simple.NewDirectedGraph()
	for r := 0; r < n; r++ {
		g.AddNode(simple.Node(r))
	}
	for r, u := range t.Up {
		if u >= 0 {
			g.SetEdge(g.NewEdge(simple.Node(r), simple.Node(u)))
		}
	}
	if _, err := topo.Sort(g); err != nil {
		var cyc topo.Unorderable
		if errors.As(err, &cyc) && len(cyc) > 0 {
			var ranks []int
			for _, nd := range cyc[0] {
				ranks = append(ranks, int(nd.ID()))
			}
			sort.Ints(ranks)
			return fmt.Errorf("ranks %v form a cycle of parents", ranks)
		}
		return fmt.Errorf("tree: %v", err)
	}
	return nil
}

// reachesRoot reports whether every rank reaches a rank of parent −1 by its parents (up holds
// parents in range).
func reachesRoot(up []int) bool {
	const (
		unseen = iota
		onPath
		reaches
	)
	state := make([]uint8, len(up))
	for r := range up {
		x := r
		for x >= 0 && state[x] == unseen {
			state[x] = onPath
			x = up[x]
		}
		if x >= 0 && state[x] == onPath {
			return false // a cycle
		}
		for x := r; x >= 0 && state[x] == onPath; x = up[x] {
			state[x] = reaches
		}
	}
	return true
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkPerm verifies that p is a permutation of 0..n−1.
func checkPerm(p []int, n int) error {
	if len(p) != n {
		return fmt.Errorf("has %d entries, want %d", len(p), n)
	}
	seen := make([]bool, n)
	for i, v := range p {
		if v < 0 || v >= n {
			return fmt.Errorf("entry %d is %d, out of range 0..%d", i, v, n-1)
		}
		if seen[v] {
			return fmt.Errorf("entry %d repeats %d", i, v)
		}
		seen[v] = true
	}
	return nil
}
