package simnet

import (
	"testing"

	"github.com/simccl/simccl/tuning"
)

func TestZZProfTree(t *testing.T) {
	m, err := HGXH100(64, nil, &tuning.Config{Algo: "tree", Proto: "simple"})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(nil)
	cl, _ := NewCluster(e, m.Node, m.Nodes, m.Fabric)
	tm, _ := TimingFor("", tuning.Tree, tuning.Simple)
	res, err := SimulateTree(e, cl, TreeSpec{Bytes: 1 << 30, Proto: tuning.Simple, Trees: m.Trees[:16], MaxMessages: 500000}, tm)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("events %d recomputes %d flows/recompute %.0f maxactive %d", res.Events, e.Recomputes, float64(e.CompVisited)/float64(e.Recomputes), e.MaxActive)
}
