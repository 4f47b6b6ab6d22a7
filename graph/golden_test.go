package graph_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

var update = flag.Bool("update", false, "rewrite graph/testdata/*.golden")

// goldenInputs are every topology of the corpus and every example under examples/topos.
func goldenInputs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range []string{corpus + "*.xml", "../examples/topos/*.xml"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 30 {
		t.Fatalf("only %d topology files found", len(files))
	}
	return files
}

// render is what a golden file holds: a header naming the view, the warnings, then the
// NCCL-format printout of rank 0's system as one node of two (nRanks = 2 × GPUs, so that the
// maxBw line is the inter-node one and NET paths are shown as NCCL uses them across nodes).
func render(doc *ncclxml.Document) (string, error) {
	probe, err := topo.FromXML(doc, graph.Options{NoTrim: true})
	if err != nil {
		return "", err
	}
	s, err := topo.FromXML(doc, graph.Options{NRanks: 2 * len(probe.Nodes[graph.GPU])})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# NCCL %s, rank 0 of %d (2 nodes)\n", s.Version, 2*len(probe.Nodes[graph.GPU]))
	for _, w := range s.Warnings {
		fmt.Fprintf(&b, "# warning: %s\n", strings.TrimPrefix(w, "../"))
	}
	for _, u := range s.Unreachable {
		fmt.Fprintf(&b, "# unreachable: %s\n", u)
	}
	for _, l := range s.Lines() {
		b.WriteString(l + "\n")
	}
	return b.String(), nil
}

// TestGolden compares our printout of every loadable topology with graph/testdata/<name>.golden
// (rewrite with `go test ./graph -update`, then review the diff).
func TestGolden(t *testing.T) {
	n := 0
	for _, f := range goldenInputs(t) {
		doc, err := ncclxml.ReadFile(f)
		if err != nil || doc.Kind() != ncclxml.KindSystem {
			continue
		}
		got, err := render(doc)
		if err != nil {
			continue // the outcome table (TestCorpusOutcomes) covers failures
		}
		n++
		name := strings.TrimSuffix(filepath.Base(f), ".xml")
		if strings.Contains(f, "examples/topos") {
			name = "example-" + name
		}
		golden := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%s: %v (run go test ./graph -update)", name, err)
			continue
		}
		if string(want) != got {
			t.Errorf("%s: printout differs from %s (run go test ./graph -update and review the diff)\n got:\n%s", name, golden, got)
		}
	}
	if n < 20 {
		t.Fatalf("only %d goldens compared", n)
	}
}
