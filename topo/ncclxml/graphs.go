package ncclxml

import (
	"bufio"
	"bytes"
	stdxml "encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// Graph dumps: the <graphs version="1"> files NCCL writes with NCCL_GRAPH_DUMP_FILE and reads
// with NCCL_GRAPH_FILE (NCCL 2.28 search.cc ncclTopoDumpGraphs):
//
//	<graphs version="1">
//	  <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra="20" speedinter="20"
//	         latencyinter="0" typeintra="NVL" typeinter="PIX" samechannels="1">
//	    <channel>
//	      <net dev="0"/> <gpu dev="0"/> <gpu dev="0x1"/> ... <net dev="0"/>
//	    </channel>
//	  </graph>
//	</graphs>

// Graph ids NCCL writes (NCCL 2.28 init.cc).
const (
	GraphRing          = 0
	GraphTree          = 1
	GraphCollNetChain  = 2
	GraphNVLS          = 3
	GraphCollNetDirect = 4
)

// Graphs is a whole graph dump.
type Graphs struct {
	Graphs []GraphDump `json:"graphs"`
	// HexIDs writes dev ids as NCCL 2.28 does, C's "%#lx" ("0", "0x1", "0x100000000000000");
	// false writes them in decimal as older releases did. ReadGraphs sets it when any dev id in
	// the input is written in hex.
	HexIDs bool `json:"hexIds"`
}

// GraphDump is one <graph>: the result of one channel search (NCCL's struct ncclTopoGraph).
type GraphDump struct {
	ID        int `json:"id"`      // 0 ring, 1 tree, 2 CollNet chain, 3 NVLS, 4 CollNet direct
	Pattern   int `json:"pattern"` // NCCL_TOPO_PATTERN_*: 1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS, 6 CollNet direct
	CrossNic  int `json:"crossNic"`
	NChannels int `json:"nChannels"` // as written; not checked against len(Channels)
	// SpeedIntra and SpeedInter are bwIntra and bwInter in GB/s per channel; LatencyInter is µs.
	SpeedIntra   float64 `json:"speedIntra"`
	SpeedInter   float64 `json:"speedInter"`
	LatencyInter float64 `json:"latencyInter"`
	// TypeIntra and TypeInter are path type names (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET).
	TypeIntra    string    `json:"typeIntra"`
	TypeInter    string    `json:"typeInter"`
	SameChannels int       `json:"sameChannels"`
	Channels     []Channel `json:"channels"`
	// Line is where the <graph> element starts in the input (0 for graphs built in code).
	Line int `json:"line,omitempty"`
}

// Channel is one <channel>: the GPUs in order and the NET devices the channel starts and ends
// at (two for inter-node graphs, none for single-node ones).
type Channel struct {
	// Nets are the <net dev> ids in input order. On output the first is written before the GPUs
	// and the others after them, which is where NCCL puts them.
	Nets []int64 `json:"nets"`
	GPUs []int64 `json:"gpus"` // <gpu dev> ids in input order
}

// ReadGraphs decodes a graph dump. Unknown attributes are ignored (NCCL ignores them too);
// unknown elements, missing or malformed attributes are errors located at their line.
func ReadGraphs(doc *Document) (*Graphs, error) {
	root := doc.Root()
	if doc.Kind() != KindGraphs {
		return nil, doc.Errorf(root, "<%s> is not a graph dump (want <graphs version=\"1\">)", root.Tag)
	}
	gs := &Graphs{}
	for _, ge := range root.ChildElements() {
		if ge.Tag != "graph" || ge.Space != "" {
			return nil, doc.Errorf(ge, "unexpected <%s> in <graphs> (want <graph>)", ge.FullTag())
		}
		g, err := readGraph(doc, ge, &gs.HexIDs)
		if err != nil {
			return nil, err
		}
		gs.Graphs = append(gs.Graphs, g)
	}
	return gs, nil
}

// ReadGraphsFile reads the graph dump at path (an NCCL_GRAPH_DUMP_FILE).
func ReadGraphsFile(path string) (*Graphs, error) {
	doc, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ReadGraphs(doc)
}

// ParseGraphs reads a graph dump held in memory; name is used in error messages.
func ParseGraphs(data []byte, name string) (*Graphs, error) {
	doc, err := ParseBytes(data, name)
	if err != nil {
		return nil, err
	}
	return ReadGraphs(doc)
}

func readGraph(doc *Document, ge *etree.Element, hex *bool) (GraphDump, error) {
	g := GraphDump{Line: doc.Line(ge)}
	ints := []struct {
		key string
		dst *int
	}{{"id", &g.ID}, {"pattern", &g.Pattern}, {"crossnic", &g.CrossNic}, {"nchannels", &g.NChannels}, {"samechannels", &g.SameChannels}}
	for _, f := range ints {
		v, err := doc.RequireInt(ge, f.key)
		if err != nil {
			return g, err
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			return g, doc.Errorf(ge, "<graph %s=%d>: out of range", f.key, v)
		}
		*f.dst = int(v)
	}
	floats := []struct {
		key      string
		dst      *float64
		required bool
	}{{"speedintra", &g.SpeedIntra, true}, {"speedinter", &g.SpeedInter, true}, {"latencyinter", &g.LatencyInter, false}}
	for _, f := range floats {
		// latencyinter is optional: dumps from NCCL before 2.12 lack it and NCCL reads it as 0.
		v, ok, err := doc.AttrFloat(ge, f.key)
		if err != nil {
			return g, err
		}
		if !ok && f.required {
			return g, doc.Errorf(ge, "<graph> without %s", f.key)
		}
		*f.dst = v
	}
	var err error
	if g.TypeIntra, err = doc.RequireAttr(ge, "typeintra"); err != nil {
		return g, err
	}
	if g.TypeInter, err = doc.RequireAttr(ge, "typeinter"); err != nil {
		return g, err
	}
	for _, ce := range ge.ChildElements() {
		if ce.Tag != "channel" || ce.Space != "" {
			return g, doc.Errorf(ce, "unexpected <%s> in <graph> (want <channel>)", ce.FullTag())
		}
		var c Channel
		for _, ne := range ce.ChildElements() {
			if ne.Space != "" || (ne.Tag != "net" && ne.Tag != "gpu") {
				return g, doc.Errorf(ne, "unexpected <%s> in <channel> (want <net> or <gpu>)", ne.FullTag())
			}
			s, err := doc.RequireAttr(ne, "dev")
			if err != nil {
				return g, err
			}
			v, err := ParseInt(s)
			if err != nil {
				return g, doc.Errorf(ne, "<%s dev>: %v", ne.Tag, err)
			}
			if strings.HasPrefix(strings.TrimLeft(s, "+-"), "0x") || strings.HasPrefix(strings.TrimLeft(s, "+-"), "0X") {
				*hex = true
			}
			if ne.Tag == "net" {
				c.Nets = append(c.Nets, v)
			} else {
				c.GPUs = append(c.GPUs, v)
			}
		}
		g.Channels = append(g.Channels, c)
	}
	return g, nil
}

// WriteTo writes the dump in NCCL's layout: two-space indentation, one element per line,
// numbers as C's "%g" writes them, a <graph> without channels written as an empty element.
func (gs *Graphs) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	b := bufio.NewWriter(cw)
	b.WriteString("<graphs version=\"1\">\n")
	for i := range gs.Graphs {
		g := &gs.Graphs[i]
		fmt.Fprintf(b, "  <graph id=\"%d\" pattern=\"%d\" crossnic=\"%d\" nchannels=\"%d\" speedintra=\"%s\" speedinter=\"%s\" latencyinter=\"%s\" typeintra=\"%s\" typeinter=\"%s\" samechannels=\"%d\"",
			g.ID, g.Pattern, g.CrossNic, g.NChannels, formatG(g.SpeedIntra), formatG(g.SpeedInter), formatG(g.LatencyInter),
			escapeAttr(g.TypeIntra), escapeAttr(g.TypeInter), g.SameChannels)
		if len(g.Channels) == 0 {
			b.WriteString("/>\n")
			continue
		}
		b.WriteString(">\n")
		for _, c := range g.Channels {
			b.WriteString("    <channel>\n")
			for j, n := range c.Nets {
				if j == 1 {
					break
				}
				fmt.Fprintf(b, "      <net dev=\"%s\"/>\n", gs.formatID(n))
			}
			for _, d := range c.GPUs {
				fmt.Fprintf(b, "      <gpu dev=\"%s\"/>\n", gs.formatID(d))
			}
			for j := 1; j < len(c.Nets); j++ {
				fmt.Fprintf(b, "      <net dev=\"%s\"/>\n", gs.formatID(c.Nets[j]))
			}
			b.WriteString("    </channel>\n")
		}
		b.WriteString("  </graph>\n")
	}
	b.WriteString("</graphs>\n")
	err := b.Flush()
	return cw.n, err
}

// Bytes returns the dump as WriteTo writes it.
func (gs *Graphs) Bytes() []byte {
	var buf bytes.Buffer
	gs.WriteTo(&buf) // a bytes.Buffer does not fail
	return buf.Bytes()
}

// formatID writes an id as C's "%#lx" (NCCL 2.28) or "%ld". Negative ids only appear in hand
// edited files; they are written in decimal either way so that they read back unchanged.
func (gs *Graphs) formatID(v int64) string {
	if gs.HexIDs && v > 0 {
		return "0x" + strconv.FormatUint(uint64(v), 16)
	}
	return strconv.FormatInt(v, 10)
}

// formatG formats like C's printf("%g"): six significant digits, trailing zeros removed.
func formatG(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func escapeAttr(s string) string {
	var b strings.Builder
	stdxml.EscapeText(&b, []byte(s)) // escapes <>&'" and \t \n \r
	return b.String()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
