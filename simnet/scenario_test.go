package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
)

// hgxMachine is the embedded DGX H100: 18 NVLinks × 20.6 GB/s (NCCL 2.28 ncclTopoNVLinkBw for
// sm90) per GPU to the NVSwitches, 8 NICs of 400 Gb/s.
func hgxMachine(t *testing.T, nodes int) (*Machine, *planner.Planner) {
	t.Helper()
	return testMachine(t, "dgx-h100", nodes, nil, "", "")
}

func TestMachineBusBwBelowBottleneck(t *testing.T) {
	m, _ := hgxMachine(t, 1)
	for _, f := range []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce, coll.SendRecv, coll.AllToAll} {
		for _, size := range []int64{1 << 10, 1 << 20, 64 << 20} {
			row, res, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
			if err != nil {
				t.Fatalf("%v %d: %v", f, size, err)
			}
			if res.Time <= 0 || row.BusBw <= 0 {
				t.Fatalf("%v %d: time %v busbw %v", f, size, res.Time, row.BusBw)
			}
			// The bottleneck is one GPU's NVLink port, 370.8 GB/s each way. Ring and point-to-point
			// rows carry busbw's worth of bytes through it; an NVLS all-reduce sends each byte of
			// its buffer once to the switch and 1/n of it once more (the reduced slice it
			// multicasts), so its algbw is at most port/(1+1/n) and its busbw that × 2(n−1)/n.
			bound := 370.8
			if row.Algo == "NVLS" {
				n := 8.0
				bound = 370.8 / (1 + 1/n) * coll.BusFactor(f, 8)
			}
			if row.BusBw > bound*1.0001 {
				t.Errorf("%v %d: busbw %.1f GB/s above the %.1f GB/s NVLink port bound", f, size, row.BusBw, bound)
			}
			t.Logf("%-14s %10d %-5s %-6s nch %2d  %9.2f us  busbw %7.2f", row.Coll, size, row.Algo, row.Proto, row.NChannels, row.TimeUs, row.BusBw)
		}
	}
}

// Two nodes joined through a single 50 Gb/s NIC each (the embedded PCIe box has one NIC; the
// fabric sets its speed, below the box's PCIe and inter-socket links so that the NIC is the
// bottleneck): every ring channel crosses it, so the ring's busbw can never exceed 6.25 GB/s, and
// a large all-reduce comes close to it.
func TestTwoNodeBusBwBoundedByNIC(t *testing.T) {
	fab := DefaultFabric()
	if err := fab.Set("nic_speed", "50Gbps"); err != nil {
		t.Fatal(err)
	}
	m, _ := testMachine(t, "pcie-8gpu-2socket", 2, fab, "ring", "")
	for _, size := range []int64{1 << 20, 256 << 20} {
		row, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if row.BusBw > 6.25*1.0001 {
			t.Fatalf("%d B: busbw %.2f GB/s above the 6.25 GB/s NIC", size, row.BusBw)
		}
		if size == 256<<20 && row.BusBw < 0.8*6.25 {
			t.Fatalf("%d B: busbw %.2f GB/s, want close to the 6.25 GB/s NIC", size, row.BusBw)
		}
		t.Logf("%d B: %s/%s busbw %.2f", size, row.Algo, row.Proto, row.BusBw)
	}
}
