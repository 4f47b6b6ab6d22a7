package report

import (
	"testing"

	"github.com/simccl/simccl/planner"
)

// testPlanner is the planner of a topology (an embedded name or a file; "" for the default) over
// nodes nodes with NCCL's default settings.
func testPlanner(t testing.TB, topo string, nodes int) *planner.Planner {
	t.Helper()
	name, doc, err := planner.LoadTopology(topo, planner.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
