package simnet

import (
	"testing"

	"github.com/simccl/simccl/tuning"
)

func BenchmarkRing64Nodes(b *testing.B) {
	m, err := HGXH100(64, nil, &tuning.Config{Algo: "ring", Proto: "simple"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		e := NewEngine(nil)
		cl, _ := NewCluster(e, m.Node, m.Nodes, m.Fabric)
		tm, _ := TimingFor("", tuning.Ring, tuning.Simple)
		if _, err := SimulateRing(e, cl, RingSpec{Func: tuning.AllReduce, Bytes: 1 << 30, Proto: tuning.Simple, Rings: m.Rings, MaxMessages: 1_000_000}, tm); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRing128Nodes(b *testing.B) {
	m, err := HGXH100(128, nil, &tuning.Config{Algo: "ring", Proto: "simple"})
	if err != nil {
		b.Fatal(err)
	}
	m.Fabric.Routing = "rail"
	for b.Loop() {
		e := NewEngine(nil)
		cl, _ := NewCluster(e, m.Node, m.Nodes, m.Fabric)
		tm, _ := TimingFor("", tuning.Ring, tuning.Simple)
		res, err := SimulateRing(e, cl, RingSpec{Func: tuning.AllReduce, Bytes: 1 << 30, Proto: tuning.Simple, Rings: m.Rings}, tm)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(e.CompVisited)/float64(e.Recomputes), "flows/recompute")
		b.ReportMetric(float64(e.Recomputes), "recomputes")
		b.ReportMetric(float64(res.Events), "events")
	}
}
