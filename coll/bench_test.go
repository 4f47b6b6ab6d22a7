package coll

import "testing"

// nvlsTreeBenchPlan is two channels of an NVLSTree all-reduce of 8 MiB each over 16 nodes of 8
// ranks (16 loops per channel), the kind of folded plan simnet replays.
var nvlsTreeBenchPlan = Plan{Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 128, NNodes: 16, NChannels: 2,
	Count: 2 * 8 << 20 / 4, DataType: Float32}

func BenchmarkCompileNVLSTree(b *testing.B) {
	for b.Loop() {
		if _, err := Compile(nvlsTreeBenchPlan); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewIndexNVLSTree(b *testing.B) {
	s, err := Compile(nvlsTreeBenchPlan)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := NewIndex(s); err != nil {
			b.Fatal(err)
		}
	}
}
