package tuning

import (
	"fmt"
	"testing"

	"github.com/simccl/simccl/coll"
)

// hopperCluster is an 8-GPU H100 node × nodes communicator as NCCL 2.28 searches it on a DGX H100
// with eight 400 Gb/s NICs (ring/tree 8 channels, NVL intra, PIX inter).
func hopperCluster(nodes int) *Comm {
	c := &Comm{NRanks: 8 * nodes, NNodes: nodes, CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel", HasNVSwitch: true}
	g := GraphInfo{Pattern: PatternRing, NChannels: 8, BwIntra: 40, BwInter: 40, TypeIntra: PathNVL, TypeInter: PathPIX, SameChannels: true}
	if nodes > 1 {
		g.BwInter = 48
	}
	c.Graphs[GraphRing] = g
	g.Pattern = PatternBalancedTree
	c.Graphs[GraphTree] = g
	return c
}

// BenchmarkModelSweep: Model plus a 30-size sweep (8 B … 4 GiB, ×2) of the five tuned collectives.
func BenchmarkModelSweep(b *testing.B) {
	for _, nodes := range []int{1, 8, 1024} {
		b.Run(fmt.Sprintf("8x%d", nodes), func(b *testing.B) {
			c := hopperCluster(nodes)
			for b.Loop() {
				t, err := Model(c, nil)
				if err != nil {
					b.Fatal(err)
				}
				for f := coll.Func(0); f < coll.NumTunedFuncs; f++ {
					for i := 0; i < 30; i++ {
						if _, err := t.SelectBytes(f, 8<<i); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}

// BenchmarkSelect: one call's selection (cost table, pick, channel schedule).
func BenchmarkSelect(b *testing.B) {
	t, err := Model(hopperCluster(8), nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := t.SelectBytes(coll.AllReduce, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelectGroup: a group of 256 calls of mixed sizes.
func BenchmarkSelectGroup(b *testing.B) {
	t, err := Model(hopperCluster(8), nil)
	if err != nil {
		b.Fatal(err)
	}
	calls := make([]Call, 256)
	for i := range calls {
		calls[i] = Call{Func: coll.Func(i % 5), Count: int64(1) << (i % 24), ElemSize: 2}
	}
	for b.Loop() {
		if _, err := t.SelectGroup(calls); err != nil {
			b.Fatal(err)
		}
	}
}
