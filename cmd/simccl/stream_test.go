package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/simnet"
)

// The streamed table is simnet.WriteTable's, line for line: with the notes all known at the start,
// the same bytes; notes learnt while simulating come after the rows, before the footer. The
// "nccl runs" column is in the header where a row will need it (known from planning), and a row
// without a substitution reads the same in either table.
func TestTableStreamMatchesWriteTable(t *testing.T) {
	h := simnet.RunHeader{Program: "simccl", Version: "vTEST", Topology: "dgx-h100", Nodes: 2, GPUsPerNode: 8, NRanks: 16, NChannels: 16,
		NCCLRelease: "2.28", DataType: "float", Op: "sum", Collectives: []string{"all_reduce"}}
	row := func(bytes int64, nccl string) simnet.Row {
		return simnet.Row{Coll: "all_reduce", Bytes: bytes, Count: bytes / 4, Type: "float", RedOp: "sum", TimeUs: float64(bytes) / 1e4,
			AlgBw: 1, BusBw: 2, Algo: "Ring", Proto: "Simple", NChannels: 16, Mode: "schedule", NCCL: nccl}
	}
	for _, c := range []struct {
		name string
		rows []simnet.Row
	}{
		{"plain", []simnet.Row{row(1024, ""), row(1<<20, ""), row(1<<30, "")}},
		{"substituted", []simnet.Row{row(1024, ""), row(1<<20, "CollNetDirect/Simple/16"), row(1<<30, "")}},
		{"no rows", nil},
	} {
		subst := false
		for _, r := range c.rows {
			subst = subst || r.NCCL != ""
		}
		stream := func(head, late []string) string {
			var out bytes.Buffer
			ts := &tableStream{w: &out, h: h}
			require.NoError(t, ts.begin(head, subst))
			for _, r := range c.rows {
				require.NoError(t, ts.row(r))
			}
			require.NoError(t, ts.end(late))
			return out.String()
		}
		notes := []string{"a plan note", "a mode note"}
		var want bytes.Buffer
		require.NoError(t, simnet.WriteTable(&want, h, c.rows, notes))
		require.Equal(t, want.String(), stream(notes, nil), c.name)

		got := stream(notes[:1], notes[1:])
		moved := strings.Replace(want.String(), "# note: a mode note\n", "", 1)
		if len(c.rows) > 0 {
			moved = strings.Replace(moved, "# Out of bounds", "# note: a mode note\n# Out of bounds", 1)
		} else {
			moved += "# note: a mode note\n"
		}
		require.Equal(t, moved, got, c.name)
		require.Equal(t, subst, strings.Contains(got, "nccl runs"), c.name)
	}
}
