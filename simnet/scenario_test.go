package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
)

// hgx is an 8-GPU NVSwitch node in the H100 shape: 18 NVLinks x 20.6 GB/s (NCCL 2.28's
// SM90_NVLINK_BW) per GPU, 8 NICs of 400 Gb/s.
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
	for _, f := range []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce, coll.SendRecv, coll.AllToAll} {
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
		row, _, err := m.Run(coll.AllReduce, size, coll.Float32, coll.Sum, RunOptions{})
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

// AllToAll runs as NCCL's p2p rounds: round d (every rank to rank+d) on its own channels, so the
// self copy of round 0 and the transfers to other ranks use disjoint channels when nRanks × the
// channels per transfer fit in the p2p channels; every byte is still sent once.
func TestAllToAllRounds(t *testing.T) {
	m := hgxMachine(t, 1)
	plan, _, err := m.Plan(coll.AllToAll, 8<<20, coll.Float32, coll.Sum)
	if err != nil {
		t.Fatal(err)
	}
	total, _ := m.Table.P2PChannels()
	k := plan.NChannels
	if k*plan.NRanks > total {
		t.Fatalf("%d channels per transfer x %d ranks > %d p2p channels: pick a smaller size", k, plan.NRanks, total)
	}
	rounds := m.rounds(plan)
	if len(rounds) != plan.NRanks {
		t.Fatalf("%d rounds, want %d", len(rounds), plan.NRanks)
	}
	used := map[int]int{}
	var count int64
	for d, q := range rounds {
		for c := q.ChannelLo; c < q.ChannelLo+q.NChannels; c++ {
			if o, ok := used[c]; ok {
				t.Errorf("channel %d used by rounds %d and %d", c, o, d)
			}
			used[c] = d
		}
		for _, tr := range q.Transfers {
			if tr.To != (tr.From+d)%plan.NRanks {
				t.Errorf("round %d has transfer %d->%d", d, tr.From, tr.To)
			}
			count += tr.Count
		}
	}
	if want := plan.Count * int64(plan.NRanks*plan.NRanks); count != want {
		t.Errorf("rounds move %d elements, want %d", count, want)
	}
	s, err := coll.Compile(rounds...)
	if err != nil {
		t.Fatal(err)
	}
	sum := coll.Summarize(s)
	// Every rank sends count×elt to each of the other ranks (the self copy is not a message).
	if want := plan.Count * 4 * int64(plan.NRanks-1) * int64(plan.NRanks); sum.Total.SentBytes != want {
		t.Errorf("schedule sends %d bytes, want %d", sum.Total.SentBytes, want)
	}
	if plain := m.rounds(coll.Plan{Func: coll.AllReduce, NRanks: 8}); len(plain) != 1 {
		t.Errorf("an AllReduce plan split into %d", len(plain))
	}
}
