package tuning_test

import (
	"fmt"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
)

// The 2×H200 machine as NCCL 2.28.9 searched it (graph lines of its log): choices for a few sizes.
func ExampleTable_Select() {
	comm := &tuning.Comm{NRanks: 2, NNodes: 1, CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel"}
	comm.Graphs[tuning.GraphRing] = tuning.GraphInfo{Pattern: 4, NChannels: 12, BwIntra: 30, BwInter: 30,
		TypeIntra: tuning.PathNVL, TypeInter: tuning.PathPIX, SameChannels: true}
	comm.Graphs[tuning.GraphTree] = tuning.GraphInfo{Pattern: 1, NChannels: 12, BwIntra: 60, BwInter: 60,
		TypeIntra: tuning.PathNVL, TypeInter: tuning.PathPIX}
	table, err := tuning.Model(comm, &tuning.Config{Version: "2.28"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range []int64{4 << 10, 1 << 20, 64 << 20} {
		ch, _ := table.Select(tuning.Call{Func: coll.AllReduce, Count: n / 4, ElemSize: 4})
		fmt.Printf("%s  (%.1f us)\n", ch.Line(), ch.TimeUs)
	}
	fmt.Println(strings.TrimSpace(table.Lines()[7]))
	// Output:
	// AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}  (7.8 us)
	// AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}  (15.2 us)
	// AllReduce: 67108864 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}  (201.6 us)
	// AllReduce |     8.0/  61.1 |    16.5/ 180.6 |    16.4/ 232.2 |     7.8/ 141.0 |    17.8/ 331.2 |    15.2/ 360.0 |     0.8/   0.0 |     0.8/   0.0 |    39.2/   0.0 |
}
