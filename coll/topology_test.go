package coll

import (
	"reflect"
	"testing"
)

// Hand-computed from the ncclGetBtree rule (NCCL 2.30.7 trees.cc): parent, lower child, higher child and
// child type of every node, for 1..9 nodes.
func TestBtreeHandComputed(t *testing.T) {
	type node struct{ up, d0, d1, ct int }
	want := map[int][]node{
		1: {{-1, -1, -1, -1}},
		2: {{-1, -1, 1, -1}, {0, -1, -1, 1}},
		3: {{-1, -1, 2, -1}, {2, -1, -1, 0}, {0, 1, -1, 1}},
		4: {{-1, -1, 2, -1}, {2, -1, -1, 0}, {0, 1, 3, 1}, {2, -1, -1, 1}},
		5: {{-1, -1, 4, -1}, {2, -1, -1, 0}, {4, 1, 3, 0}, {2, -1, -1, 1}, {0, 2, -1, 1}},
		6: {{-1, -1, 4, -1}, {2, -1, -1, 0}, {4, 1, 3, 0}, {2, -1, -1, 1}, {0, 2, 5, 1}, {4, -1, -1, 1}},
		7: {{-1, -1, 4, -1}, {2, -1, -1, 0}, {4, 1, 3, 0}, {2, -1, -1, 1}, {0, 2, 6, 1}, {6, -1, -1, 0}, {4, 5, -1, 1}},
		8: {{-1, -1, 4, -1}, {2, -1, -1, 0}, {4, 1, 3, 0}, {2, -1, -1, 1}, {0, 2, 6, 1}, {6, -1, -1, 0}, {4, 5, 7, 1}, {6, -1, -1, 1}},
		9: {{-1, -1, 8, -1}, {2, -1, -1, 0}, {4, 1, 3, 0}, {2, -1, -1, 1}, {8, 2, 6, 0}, {6, -1, -1, 0}, {4, 5, 7, 1}, {6, -1, -1, 1}, {0, 4, -1, 1}},
	}
	for n := 1; n <= 9; n++ {
		for r := 0; r < n; r++ {
			u, d0, d1, ct := Btree(n, r)
			if got := (node{u, d0, d1, ct}); got != want[n][r] {
				t.Errorf("Btree(%d, %d) = %+v, want %+v", n, r, got, want[n][r])
			}
		}
	}
}

// Tree 1: mirrored for even counts, shifted by one for odd counts (hand-computed parents).
func TestDtreeSecondTree(t *testing.T) {
	want := map[int][]int{
		1: {-1},
		2: {1, -1},
		4: {1, 3, 1, -1},
		5: {1, -1, 3, 0, 3},
		// shift: node r is btree node r−1 mod 3; btree(3) parents [-1 2 0] → r=0: 0+1, r=1: root, r=2: 2+1 mod 3.
		3: {1, -1, 0},
		8: {1, 3, 1, 7, 5, 3, 5, -1}, // r ↔ 7−r over btree(8) parents [-1 2 4 2 0 6 4 6]
	}
	for n, ups := range want {
		for r, w := range ups {
			if u, _, _, _ := Dtree(n, r, 1); u != w {
				t.Errorf("Dtree(%d, %d, 1) parent = %d, want %d", n, r, u, w)
			}
		}
	}
}

// Both trees are consistent trees for every node count up to 130, and the two roots differ (the
// point of the double binary tree: a node is a leaf in at least one tree) for n ≥ 2.
func TestDtreeConsistent(t *testing.T) {
	for n := 1; n <= 130; n++ {
		trees, err := BuildTrees([][]int{{0}}, n, 1, PatternBalancedTree)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(trees) != 2 {
			t.Fatalf("n=%d: %d trees", n, len(trees))
		}
		roots := [2]int{}
		for i, tr := range trees {
			for r, u := range tr.Up {
				if u == -1 {
					roots[i] = r
				}
			}
		}
		if n >= 2 && roots[0] == roots[1] {
			t.Errorf("n=%d: both trees rooted at %d", n, roots[0])
		}
		if n >= 3 {
			for r := 0; r < n; r++ {
				if len(trees[0].Down[r]) > 0 && len(trees[1].Down[r]) > 0 && n%2 == 0 {
					t.Errorf("n=%d: node %d is inner in both trees", n, r)
				}
			}
		}
	}
}

func TestBuildRingsCrossNic(t *testing.T) {
	rings, err := BuildRings([][]int{{0, 1}, {1, 0}}, 2, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 1, 3, 2}, {1, 0, 2, 3}}
	if !reflect.DeepEqual(rings, want) {
		t.Errorf("crossNic rings %v, want %v", rings, want)
	}
	rings, _ = BuildRings([][]int{{0, 1}, {1, 0}}, 2, 2, false)
	want = [][]int{{0, 1, 2, 3}, {1, 0, 3, 2}}
	if !reflect.DeepEqual(rings, want) {
		t.Errorf("rings %v, want %v", rings, want)
	}
	if _, err := BuildRings([][]int{{0, 0}}, 2, 2, false); err == nil {
		t.Error("a chain repeating a rank was accepted")
	}
}

// Multi-node trees: intra-node chains plus the inter-node double binary tree, every pattern.
func TestBuildTreesMultiNode(t *testing.T) {
	for _, pat := range []TreePattern{PatternBalancedTree, PatternSplitTree, PatternTree} {
		trees, err := BuildTrees([][]int{{0, 1, 2, 3}, {3, 2, 1, 0}}, 4, 4, pat)
		if err != nil {
			t.Fatalf("pattern %d: %v", pat, err)
		}
		if len(trees) != 4 {
			t.Fatalf("pattern %d: %d trees", pat, len(trees))
		}
		// Channel 0, tree 0, node 0 is the inter-node root: its chain head (rank 0) is the root.
		if trees[0].Up[0] != -1 {
			t.Errorf("pattern %d: rank 0 has parent %d", pat, trees[0].Up[0])
		}
		// Node 2's head (rank 8) hangs below node 0's child1 rank: rank 0 for TREE/BALANCED, rank 1 for SPLIT.
		wantUp := 0
		if pat == PatternSplitTree {
			wantUp = 1
		}
		if trees[0].Up[8] != wantUp {
			t.Errorf("pattern %d: rank 8's parent is %d, want %d", pat, trees[0].Up[8], wantUp)
		}
		// A tree all-reduce over these links gives the right sums.
		p := Plan{Func: AllReduce, Algo: Tree, Proto: LL128, NRanks: 16, Count: 5000, DataType: Float32, NChannels: 4, Trees: trees}
		runPlan(t, p, ExecOptions{})
		p.Proto = Simple
		p.ChunkSize = 2048
		runPlan(t, p, ExecOptions{InPlace: true})
	}
	if _, err := BuildTrees([][]int{{0, 1}}, 2, 2, 7); err == nil {
		t.Error("unknown pattern accepted")
	}
}
