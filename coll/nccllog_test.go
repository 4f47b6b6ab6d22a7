package coll

import (
	"bufio"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// treeLinks is one rank's links in one tree channel as an NCCL INFO log prints them.
type treeLinks struct {
	up   int
	down []int
}

var (
	// NCCL ≤2.18: "Tree 0 : -1 -> 0 -> 1/8/-1" (up -> rank -> down0/down1/down2).
	oldTreeLine = regexp.MustCompile(`NCCL INFO Tree (\d+) : (-?\d+) -> (\d+) -> (-?\d+)/(-?\d+)/(-?\d+)`)
	// NCCL ≥2.19: "Trees [0] 1/-1/-1->0->-1 [1] ..." (down0/down1/down2->rank->up, per channel).
	newTreeLine = regexp.MustCompile(`\[(\d+)\] (-?\d+)/(-?\d+)/(-?\d+)->(\d+)->(-?\d+)`)
	// NCCL ≤2.18: "Ring 00 : 7 -> 8 -> 9".
	oldRingLine = regexp.MustCompile(`NCCL INFO Ring (\d+) : (\d+) -> (\d+) -> (\d+)`)
)

// readTreeLog collects tree links per channel and rank, and ring successors per channel and rank.
func readTreeLog(t *testing.T, path string) (trees map[int]map[int]treeLinks, next map[int]map[int]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("NCCL log not available: %v", err)
	}
	defer f.Close()
	trees = map[int]map[int]treeLinks{}
	next = map[int]map[int]int{}
	atoi := func(s string) int { v, _ := strconv.Atoi(s); return v }
	add := func(ch, rank, up int, downs ...int) {
		if trees[ch] == nil {
			trees[ch] = map[int]treeLinks{}
		}
		var d []int
		for _, x := range downs {
			if x >= 0 {
				d = append(d, x)
			}
		}
		trees[ch][rank] = treeLinks{up: up, down: d}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := oldTreeLine.FindStringSubmatch(line); m != nil {
			add(atoi(m[1]), atoi(m[3]), atoi(m[2]), atoi(m[4]), atoi(m[5]), atoi(m[6]))
		}
		if strings.Contains(line, "NCCL INFO Trees ") {
			for _, m := range newTreeLine.FindAllStringSubmatch(line, -1) {
				add(atoi(m[1]), atoi(m[5]), atoi(m[6]), atoi(m[2]), atoi(m[3]), atoi(m[4]))
			}
		}
		if m := oldRingLine.FindStringSubmatch(line); m != nil {
			ch := atoi(m[1])
			if next[ch] == nil {
				next[ch] = map[int]int{}
			}
			next[ch][atoi(m[3])] = atoi(m[4])
		}
	}
	return trees, next
}

// TestTreesMatchNCCLLogs compares BuildTrees and BuildRings with the trees and rings real NCCL
// printed: 2 nodes × 8 PCIe GPUs, balanced tree (NCCL 2.18.1), and 2 "hosts" × 1 H200 (NCCL 2.28.9).
func TestTreesMatchNCCLLogs(t *testing.T) {
	cases := []struct {
		log         string
		nNodes, ppn int
		pattern     TreePattern
	}{
		{"../testdata/topos/rtx3090-8gpu-pcie-2socket-ib56g-nccl-info.log", 2, 8, PatternBalancedTree},
		{"../testdata/nccl/h200x2/fakehosts.931.log", 2, 1, PatternTree},
		{"../testdata/nccl/h200x2/fakehosts.932.log", 2, 1, PatternTree},
	}
	for _, tc := range cases {
		logged, next := readTreeLog(t, tc.log)
		if len(logged) == 0 {
			t.Fatalf("%s: no tree lines found", tc.log)
		}
		chain := make([]int, tc.ppn)
		for i := range chain {
			chain[i] = i
		}
		// One search channel, twinned: channel 0 uses tree 0, channel 1 tree 1 (NCCL 2.28
		// ncclTopoPostset, connectTrees).
		trees, err := BuildTrees([][]int{chain}, tc.nNodes, tc.ppn, tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		rings, err := BuildRings([][]int{chain, chain}, tc.nNodes, tc.ppn, false)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for ch, ranks := range logged {
			for r, want := range ranks {
				got := trees[ch%2]
				gd := append([]int(nil), got.Down[r]...)
				wd := append([]int(nil), want.down...)
				sort.Ints(gd)
				sort.Ints(wd)
				if got.Up[r] != want.up || !equalInts(gd, wd) {
					t.Errorf("%s: channel %d rank %d: built up %d down %v, NCCL printed up %d down %v", tc.log, ch, r, got.Up[r], got.Down[r], want.up, want.down)
				}
				checked++
			}
		}
		for ch, m := range next {
			ring := rings[ch%2]
			for r, nx := range m {
				for i, x := range ring {
					if x == r && ring[(i+1)%len(ring)] != nx {
						t.Errorf("%s: ring %d: rank %d sends to %d, NCCL printed %d", tc.log, ch, r, ring[(i+1)%len(ring)], nx)
					}
				}
				checked++
			}
		}
		t.Logf("%s: %d tree/ring links match NCCL's log", tc.log, checked)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
