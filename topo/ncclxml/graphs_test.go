package ncclxml

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// summary renders a graph dump as a short text for the golden files: one line per graph, one
// per channel.
func summary(gs *Graphs) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hexids=%v graphs=%d\n", gs.HexIDs, len(gs.Graphs))
	for _, g := range gs.Graphs {
		fmt.Fprintf(&b, "graph id=%d pattern=%d crossnic=%d nchannels=%d intra=%g/%s inter=%g/%s lat=%g same=%d channels=%d line=%d\n",
			g.ID, g.Pattern, g.CrossNic, g.NChannels, g.SpeedIntra, g.TypeIntra, g.SpeedInter, g.TypeInter,
			g.LatencyInter, g.SameChannels, len(g.Channels), g.Line)
		for _, c := range g.Channels {
			fmt.Fprintf(&b, "  nets=%v gpus=%#x\n", c.Nets, c.GPUs)
		}
	}
	return b.String()
}

func stripLines(gs *Graphs) {
	for i := range gs.Graphs {
		gs.Graphs[i].Line = 0
	}
}

// TestGraphsCorpus reads every corpus graph dump, checks it against a golden summary, writes it
// back and checks the output is the input byte for byte (NCCL's dumps) and reads back equal.
func TestGraphsCorpus(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*-graph.xml"))
	if len(files) < 6 {
		t.Fatalf("%d graph dumps in the corpus", len(files))
	}
	for _, f := range files {
		base := filepath.Base(f)
		t.Run(base, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			gs, err := ParseGraphs(data, base)
			if err != nil {
				t.Fatal(err)
			}
			fromFile, err := ReadGraphsFile(f)
			if err != nil || !reflect.DeepEqual(fromFile, gs) {
				t.Fatalf("ReadGraphsFile differs from ParseGraphs: %v", err)
			}
			got := summary(gs)
			golden := filepath.Join("testdata", strings.TrimSuffix(base, ".xml")+".txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("summary differs from %s (rerun with -update and review the diff):\n%s", golden, got)
			}
			out := gs.Bytes()
			if !bytes.Equal(out, data) {
				t.Errorf("written dump differs from the input:\n%s", out)
			}
			gs2, err := ParseGraphs(out, base+" (rewritten)")
			if err != nil {
				t.Fatal(err)
			}
			stripLines(gs)
			stripLines(gs2)
			if !reflect.DeepEqual(gs, gs2) {
				t.Errorf("read back differs")
			}
		})
	}
}

func TestGraphsWrite(t *testing.T) {
	gs := &Graphs{HexIDs: true, Graphs: []GraphDump{
		{ID: GraphRing, Pattern: 4, NChannels: 1, SpeedIntra: 20.6, SpeedInter: 1e6, LatencyInter: 0.5,
			TypeIntra: "NVL", TypeInter: "P<X", SameChannels: 1,
			Channels: []Channel{{Nets: []int64{0, 1}, GPUs: []int64{0, 1, 0x100000000000000}}, {GPUs: []int64{-1}}, {Nets: []int64{3}}}},
		{ID: GraphNVLS, Pattern: 5, TypeIntra: "LOC", TypeInter: "LOC"},
	}}
	want := `<graphs version="1">
  <graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="20.6" speedinter="1e+06" latencyinter="0.5" typeintra="NVL" typeinter="P&lt;X" samechannels="1">
    <channel>
      <net dev="0"/>
      <gpu dev="0"/>
      <gpu dev="0x1"/>
      <gpu dev="0x100000000000000"/>
      <net dev="0x1"/>
    </channel>
    <channel>
      <gpu dev="-1"/>
    </channel>
    <channel>
      <net dev="0x3"/>
    </channel>
  </graph>
  <graph id="3" pattern="5" crossnic="0" nchannels="0" speedintra="0" speedinter="0" latencyinter="0" typeintra="LOC" typeinter="LOC" samechannels="0"/>
</graphs>
`
	var b bytes.Buffer
	n, err := gs.WriteTo(&b)
	if err != nil || n != int64(b.Len()) {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	back, err := ParseGraphs(b.Bytes(), "w.xml")
	if err != nil {
		t.Fatal(err)
	}
	stripLines(back)
	if !reflect.DeepEqual(back, gs) {
		t.Fatalf("read back:\n%s\nwant:\n%s", summary(back), summary(gs))
	}
	gs.HexIDs = false
	if s := string(gs.Bytes()); !strings.Contains(s, `<gpu dev="72057594037927936"/>`) {
		t.Fatalf("decimal ids:\n%s", s)
	}
}

func TestGraphsErrors(t *testing.T) {
	const head = `<graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="1" speedinter="1" typeintra="NVL" typeinter="PIX" samechannels="0"`
	cases := []struct{ name, in, want string }{
		{"topology", `<system version="1"/>`, `g.xml:1: <system> is not a graph dump`},
		{"stray element", "<graphs version=\"1\">\n<ring/></graphs>", `g.xml:2: unexpected <ring> in <graphs>`},
		{"missing id", "<graphs version=\"1\">\n<graph/></graphs>", `g.xml:2: <graph> without id`},
		{"bad pattern", "<graphs version=\"1\">\n" + strings.Replace(head, `pattern="4"`, `pattern="ring"`, 1) + "/></graphs>", `g.xml:2: <graph pattern>: "ring" is not an integer`},
		{"huge id", "<graphs version=\"1\">\n" + strings.Replace(head, `id="0"`, `id="0x100000000"`, 1) + "/></graphs>", `g.xml:2: <graph id=4294967296>: out of range`},
		{"missing speed", "<graphs version=\"1\">\n" + strings.Replace(head, `speedinter="1"`, ``, 1) + "/></graphs>", `g.xml:2: <graph> without speedinter`},
		{"nan speed", "<graphs version=\"1\">\n" + strings.Replace(head, `speedinter="1"`, `speedinter="nan"`, 1) + "/></graphs>", `g.xml:2: <graph speedinter>: "nan" is not a number`},
		{"missing type", "<graphs version=\"1\">\n" + strings.Replace(head, `typeinter="PIX"`, ``, 1) + "/></graphs>", `g.xml:2: <graph> without typeinter`},
		{"stray in graph", "<graphs version=\"1\">\n" + head + ">\n<chanel/></graph></graphs>", `g.xml:3: unexpected <chanel> in <graph>`},
		{"stray in channel", "<graphs version=\"1\">\n" + head + "><channel>\n<nic dev=\"0\"/></channel></graph></graphs>", `g.xml:3: unexpected <nic> in <channel>`},
		{"gpu without dev", "<graphs version=\"1\">\n" + head + "><channel>\n<gpu/></channel></graph></graphs>", `g.xml:3: <gpu> without dev`},
		{"bad dev", "<graphs version=\"1\">\n" + head + "><channel>\n<net dev=\"0xg\"/></channel></graph></graphs>", `g.xml:3: <net dev>: "0xg" is not an integer`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseGraphs([]byte(c.in), "g.xml")
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
		})
	}
	// latencyinter is optional (older dumps lack it).
	gs, err := ParseGraphs([]byte("<graphs version=\"1\">"+head+"/></graphs>"), "g.xml")
	if err != nil || gs.Graphs[0].LatencyInter != 0 || gs.HexIDs {
		t.Fatalf("optional latencyinter: %v %+v", err, gs)
	}
}
