package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
)

// hgx is an 8-GPU NVSwitch node in the H100 shape: 18 NVLinks x 20.6 GB/s (NCCL's SM90 figure,
// fact sheet §2.3) per GPU, 8 NICs of 400 Gb/s.
func hgxMachine(t *testing.T, nodes int) *Machine {
	t.Helper()
	node := SwitchedNode("hgx", 8, 18*20.6, 8, 50, 64)
	comm := tuning.Comm{CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel", HasNVSwitch: true, AllNVLink: true}
	for _, g := range []int{tuning.GraphRing, tuning.GraphTree} {
		comm.Graphs[g] = tuning.GraphInfo{Pattern: 4, NChannels: 16, BwIntra: 20, BwInter: 20, TypeIntra: tuning.PathNVL, TypeInter: tuning.PathPIX}
	}
	comm.Graphs[tuning.GraphTree].Pattern = 1
	comm.NChannels = 16
	m, err := NewMachineFromModel(node, nodes, nil, comm, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMachineBusBwBelowBottleneck(t *testing.T) {
	m := hgxMachine(t, 1)
	for _, f := range []tuning.Func{tuning.AllReduce, tuning.AllGather, tuning.ReduceScatter, tuning.Broadcast, tuning.Reduce, tuning.SendRecv, tuning.AllToAll} {
		for _, size := range []int64{1 << 10, 1 << 20, 64 << 20} {
			row, res, err := m.Run(f, size, coll.Float32, coll.Sum, RunOptions{})
			if err != nil {
				t.Fatalf("%v %d: %v", f, size, err)
			}
			if res.Time <= 0 || row.BusBw <= 0 {
				t.Fatalf("%v %d: time %v busbw %v", f, size, res.Time, row.BusBw)
			}
			// The bottleneck is one GPU's NVLink port, 370.8 GB/s each way.
			if row.BusBw > 370.8*1.0001 {
				t.Errorf("%v %d: busbw %.1f GB/s above the 370.8 GB/s NVLink port", f, size, row.BusBw)
			}
			t.Logf("%-14s %10d %-5s %-6s nch %2d  %9.2f us  busbw %7.2f", row.Coll, size, row.Algo, row.Proto, row.NChannels, row.TimeUs, row.BusBw)
		}
	}
}

// Two nodes joined through a single 100 Gb/s NIC each: every ring channel crosses it, so the
// ring's busbw can never exceed 12.5 GB/s, and a large all-reduce comes close to it.
func TestTwoNodeBusBwBoundedByNIC(t *testing.T) {
	node := SwitchedNode("one-nic", 8, 18*20.6, 1, 12.5, 48)
	comm := tuning.Comm{CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel", HasNVSwitch: true, AllNVLink: true}
	for _, g := range []int{tuning.GraphRing, tuning.GraphTree} {
		comm.Graphs[g] = tuning.GraphInfo{Pattern: 4, NChannels: 2, BwIntra: 6, BwInter: 6, TypeIntra: tuning.PathNVL, TypeInter: tuning.PathPHB}
	}
	comm.Graphs[tuning.GraphTree].Pattern = 1
	comm.NChannels = 4
	m, err := NewMachineFromModel(node, 2, nil, comm, &tuning.Config{Algo: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{1 << 20, 256 << 20} {
		row, _, err := m.Run(tuning.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if row.BusBw > 12.5*1.0001 {
			t.Fatalf("%d B: busbw %.2f GB/s above the 12.5 GB/s NIC", size, row.BusBw)
		}
		if size == 256<<20 && row.BusBw < 10 {
			t.Fatalf("%d B: busbw %.2f GB/s, want close to the 12.5 GB/s NIC", size, row.BusBw)
		}
		t.Logf("%d B: %s/%s busbw %.2f", size, row.Algo, row.Proto, row.BusBw)
	}
}
