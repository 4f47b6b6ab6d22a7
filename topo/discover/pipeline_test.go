package discover_test

import (
	"path/filepath"
	"testing"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
)

// TestGoldensFeedTheGraph: what discovery writes is a topology the rest of the pipeline takes
// (package graph builds a system with every discovered GPU).
func TestGoldensFeedTheGraph(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/want.xml")
	if len(files) == 0 {
		t.Fatal("no testdata/*/want.xml")
	}
	for _, f := range files {
		doc, err := ncclxml.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := len(doc.Root().FindElements("//gpu"))
		s, err := topo.FromXML(doc, graph.Options{NoTrim: true})
		if err != nil {
			t.Errorf("%s: topo.FromXML: %v", f, err)
			continue
		}
		if got := len(s.GPUs()); got != want {
			t.Errorf("%s: graph has %d GPUs, the XML %d", f, got, want)
		}
	}
}
