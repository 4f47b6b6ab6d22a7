package coll

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden schedule dumps and the data-driven cases' expectations in testdata/")

// TestGoldenSchedules pins the exact step structure of small schedules (review a change with
// `go test ./coll -run Golden -update` and git diff): both executors depend on it.
func TestGoldenSchedules(t *testing.T) {
	cases := map[string]Plan{
		"ring_allreduce_n3_simple": {Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 3, Count: 1000, DataType: Float32, NChannels: 2, BuffSize: [3]int64{0, 0, 8 * 1024}},
		"ring_allgather_n4_ll":     {Func: AllGather, Algo: Ring, Proto: LL, NRanks: 4, Count: 100, DataType: Float32, ChunkSize: 128},
		"ring_broadcast_n3_root2":  {Func: Broadcast, Algo: Ring, Proto: Simple, NRanks: 3, Count: 64, DataType: Int8, Root: 2},
		"tree_allreduce_n5_ll128":  {Func: AllReduce, Algo: Tree, Proto: LL128, NRanks: 5, Count: 1000, DataType: Float32, NChannels: 2},
		"pat_reducescatter_n5":     {Func: ReduceScatter, Algo: PAT, Proto: Simple, NRanks: 5, Count: 16, DataType: Float32},
		"nvls_allreduce_n3":        {Func: AllReduce, Algo: NVLS, Proto: Simple, NRanks: 3, Count: 96, DataType: Float32},
		"nvlstree_allreduce_4x2":   {Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 4, NNodes: 2, Count: 64, DataType: Float32},
		"collnet_allreduce_4x2":    {Func: AllReduce, Algo: CollNetChain, Proto: Simple, NRanks: 4, NNodes: 2, Count: 64, DataType: Float32},
		"alltoall_n3_ll":           {Func: AllToAll, Proto: LL, NRanks: 3, Count: 8, DataType: Float32, NChannels: 2},
	}
	for name, p := range cases {
		s, err := Compile(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var buf bytes.Buffer
		if err := WriteText(&buf, s, DumpOptions{Steps: true}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name+".txt")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to create it)", name, err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: schedule differs from %s (rerun with -update and review the diff)", name, path)
		}
	}
}
