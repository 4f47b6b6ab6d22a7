package simnet

import (
	"testing"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/tuning"
)

// testMachine builds the machine of a topology (an embedded name or a file) over nodes nodes, with
// NCCL_ALGO/NCCL_PROTO set to algo and proto ("" leaves NCCL's choice), and returns its planner.
func testMachine(t testing.TB, topo string, nodes int, fab *Fabric, algo, proto string) (*Machine, *planner.Planner) {
	t.Helper()
	s := planner.Settings{}
	s.Tuning.Algo, s.Tuning.Proto = algo, proto
	return settingsMachine(t, topo, nodes, 0, fab, s)
}

// settingsMachine is nodes copies of topology topo (gpus > 0: its first gpus GPUs) joined by fab,
// planned with NCCL settings s.
func settingsMachine(t testing.TB, topo string, nodes, gpus int, fab *Fabric, s planner.Settings) (*Machine, *planner.Planner) {
	t.Helper()
	name, doc, err := planner.LoadTopology(topo, s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: nodes, GPUs: gpus, Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMachine(p.System, nodes, fab, p, p.Settings.Release)
	if err != nil {
		t.Fatal(err)
	}
	return m, p
}

// The planner's rings, trees and tuning table of a test machine.
func ringsOf(m *Machine) [][]int            { return m.Planner.(*planner.Planner).Rings }
func treesOf(m *Machine) []coll.ChannelTree { return m.Planner.(*planner.Planner).Trees }
func tableOf(m *Machine) *tuning.Table      { return m.Planner.(*planner.Planner).Table }
