package ncclxml

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/simccl/simccl/examples/topos"
)

// FuzzParse: whatever the input, Parse returns a document or an *Error, never panics; and a
// document it returns writes out as bytes that parse again into the same tree.
//
//	go test ./topo/ncclxml -run '^$' -fuzz FuzzParse -fuzztime 5m
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.xml"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, name := range topos.Names() {
		data, _ := topos.Get(name)
		f.Add(data)
	}
	for _, s := range []string{
		`<system version="1"><![CDATA[x]]><!--c--><?pi x?></system>`,
		"<system version=\"1\" a='&#13;&#9;&#10;'>&#13;</system>",
		`<!DOCTYPE system><system version="1"/>`,
		`<graphs version="1"><graph id="0"/></graphs>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := ParseBytes(data, "fuzz.xml")
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not an *Error: %v", err, err)
			}
			return
		}
		out, err := doc.Bytes()
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		doc2, err := ParseBytes(out, "fuzz.xml (rewritten)")
		if err != nil {
			t.Fatalf("read back: %v\ninput: %q\noutput: %q", err, data, out)
		}
		if a, b := canonical(doc.Doc), canonical(doc2.Doc); a != b {
			t.Fatalf("round trip changed the tree:\n%s\ninput: %q\noutput: %q", firstDiff(a, b), data, out)
		}
		// The typed graph layer must not panic either, and what it writes must read back.
		if doc.Kind() == KindGraphs {
			gs, err := ReadGraphs(doc)
			if err != nil {
				return
			}
			gs2, err := ParseGraphs(gs.Bytes(), "fuzz-graphs.xml")
			if err != nil {
				t.Fatalf("graphs read back: %v\n%s", err, gs.Bytes())
			}
			if string(gs2.Bytes()) != string(gs.Bytes()) {
				t.Fatalf("graphs rewrite not stable:\n%s\n%s", gs.Bytes(), gs2.Bytes())
			}
		}
	})
}
