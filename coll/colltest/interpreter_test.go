package colltest_test

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/coll/colltest"
)

// The kit on coll's reference interpreter: coll.Execute over the schedules Compile makes, for
// ring (every function, each protocol), tree (AllReduce) and PAT (AllGather, ReduceScatter).
// Ring Simple runs every type; the other variants three (an integer, half and fp8), as
// TestCollectivesMatchDefinition in coll covers the algorithms and protocols at large.
func TestConformanceInterpreter(t *testing.T) {
	small := coll.Plan{NChannels: 2, ChunkSize: 64}
	small.BuffSize[coll.Simple] = 8 * 512 // ring slices and credits come into play
	few := []coll.DataType{coll.Int32, coll.Float16, coll.Float8e4m3}
	variants := []struct {
		name  string
		algo  coll.Algo
		proto coll.Proto
		funcs []coll.Func
		types []coll.DataType
	}{
		{"ring/simple", coll.Ring, coll.Simple, nil, nil},
		{"ring/ll", coll.Ring, coll.LL, nil, few},
		{"ring/ll128", coll.Ring, coll.LL128, []coll.Func{coll.AllReduce, coll.Reduce, coll.ReduceScatter, coll.Broadcast, coll.AllGather}, few},
		{"tree/simple", coll.Tree, coll.Simple, []coll.Func{coll.AllReduce}, few},
		{"pat/simple", coll.PAT, coll.Simple, []coll.Func{coll.AllGather, coll.ReduceScatter}, few},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := small
			p.Algo, p.Proto = v.algo, v.proto
			if v.proto == coll.LL128 {
				p.ChunkSize = 0
			}
			// Counts a little smaller than Default's: the interpreter is slow, and 64-byte chunks
			// already make hundreds of steps.
			ms := []colltest.Matrix{
				{Ranks: []int{1, 3, 8}, Counts: []int{1, 131}, Funcs: v.funcs, Types: v.types},
				{Ranks: []int{2, 5}, Counts: []int{7, 301}, Funcs: v.funcs, Types: v.types},
			}
			colltest.Run(t, colltest.Interpreter{Plan: p}, colltest.Options{Matrix: ms, Values: true, Skip: colltest.SkipInPlaceP2P})
		})
	}
}
