package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"

	"github.com/simccl/simccl/internal/units"
)

// esc escapes text for HTML/SVG text and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// linkColour is the colour of a link type (graph.LinkType names).
func linkColour(t string) string {
	switch t {
	case "NVL":
		return "#2a9d8f"
	case "PCI":
		return "#457b9d"
	case "SYS":
		return "#e63946"
	case "NET":
		return "#f4a261"
	case "C2C":
		return "#9b5de5"
	}
	return "#999999"
}

// nodeColour is the fill of a node type.
func nodeColour(t string) string {
	switch t {
	case "GPU":
		return "#76b900"
	case "CPU":
		return "#adb5bd"
	case "PCI":
		return "#a8dadc"
	case "NVS":
		return "#2a9d8f"
	case "NIC":
		return "#f4a261"
	case "NET":
		return "#ffd6a5"
	}
	return "#dddddd"
}

// choiceColour is the colour of an algorithm/protocol pair: one hue per algorithm, darker for
// protocols that carry more per step.
func choiceColour(algo, proto string) string {
	hue := map[string]int{"Tree": 210, "Ring": 0, "CollNetDirect": 30, "CollNetChain": 50, "NVLS": 130, "NVLSTree": 170, "PAT": 280}
	light := map[string]int{"LL": 75, "LL128": 58, "Simple": 40}
	h, ok := hue[algo]
	if !ok {
		h = 0
	}
	l, ok := light[proto]
	if !ok {
		l = 50
	}
	if !ok && algo == "" {
		return "#cccccc"
	}
	return fmt.Sprintf("hsl(%d,65%%,%d%%)", h, l)
}

func bw(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// topologySVG draws the node: one <g class="node TYPE"> per node (GPUs carry data-gpu) and one
// <line class="link"> per undirected link, with its bandwidth.
func topologySVG(b *strings.Builder, t *Topology) {
	pos := map[string]TopoNode{}
	for _, n := range t.Nodes {
		pos[n.ID] = n
	}
	fmt.Fprintf(b, `<svg id="topo" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", t.W, t.H, t.W, t.H)
	b.WriteString(`<g class="links">` + "\n")
	for i, l := range t.Links {
		a, c := pos[l.A], pos[l.B]
		tip := fmt.Sprintf("%s ↔ %s: %s, %s GB/s", l.A, l.B, l.Type, bw(l.BW))
		if l.BWBack != 0 && l.BWBack != l.BW {
			tip += fmt.Sprintf(" (%s GB/s back)", bw(l.BWBack))
		}
		curve := l.Type == "NVL" && strings.HasPrefix(l.A, "GPU") && strings.HasPrefix(l.B, "GPU") || a.Y == c.Y
		var mx, my float64
		if curve {
			// Same row (GPU-GPU NVLink, CPU-CPU SYS): an arc below (GPUs) or above the row.
			bend := min(30.0+math.Abs(a.X-c.X)*0.15, 60)
			if a.Type != "GPU" {
				bend = -bend
			}
			mx, my = (a.X+c.X)/2, (a.Y+c.Y)/2+bend
			fmt.Fprintf(b, `<path class="link" data-i="%d" data-a="%s" data-b="%s" data-type="%s" d="M%.1f %.1f Q%.1f %.1f %.1f %.1f" fill="none" stroke="%s" stroke-width="%.1f" data-tip="%s"/>`+"\n",
				i, esc(l.A), esc(l.B), l.Type, a.X, a.Y, mx, my, c.X, c.Y, linkColour(l.Type), strokeW(l.BW), esc(tip))
			my = (a.Y+c.Y)/2 + bend/2
		} else {
			mx, my = (a.X+c.X)/2, (a.Y+c.Y)/2
			fmt.Fprintf(b, `<line class="link" data-i="%d" data-a="%s" data-b="%s" data-type="%s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f" data-tip="%s"/>`+"\n",
				i, esc(l.A), esc(l.B), l.Type, a.X, a.Y, c.X, c.Y, linkColour(l.Type), strokeW(l.BW), esc(tip))
		}
		fmt.Fprintf(b, `<text class="bw" x="%.1f" y="%.1f">%s</text>`+"\n", mx+3, my-2, bw(l.BW))
	}
	b.WriteString("</g>\n<g class=\"nodes\">\n")
	for _, n := range t.Nodes {
		w, h := 62.0, 24.0
		if n.Type == "NVS" {
			w = math.Max(120, t.W*0.5)
		}
		extra := ""
		if n.Type == "GPU" {
			extra = fmt.Sprintf(` data-gpu="%s" tabindex="0"`, esc(n.ID))
		} else {
			extra = fmt.Sprintf(` data-tip="%s"`, esc(n.ID+": "+n.Label))
		}
		fmt.Fprintf(b, `<g class="node %s" data-id="%s"%s><rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" rx="5" fill="%s"/><text x="%.1f" y="%.1f">%s</text></g>`+"\n",
			strings.ToLower(n.Type), esc(n.ID), extra, n.X-w/2, n.Y-h/2, w, h, nodeColour(n.Type), n.X, n.Y+4, esc(short(n.Label, 11)))
	}
	b.WriteString("</g>\n</svg>\n")
}

func strokeW(gbps float64) float64 {
	return math.Min(1.5+math.Log2(1+gbps)/1.5, 7)
}

// legend writes coloured swatches.
func legend(b *strings.Builder, items [][2]string) {
	b.WriteString(`<div class="legend">`)
	for _, it := range items {
		fmt.Fprintf(b, `<span><i style="background:%s"></i>%s</span>`, it[1], esc(it[0]))
	}
	b.WriteString("</div>\n")
}

// fabricSVG sketches the fabric: spines (or aggregation switches) on top, leaves below grouped by
// rail, a count where there are too many to draw.
func fabricSVG(b *strings.Builder, f *FabricSum) {
	const maxDraw = 48
	leaves := min(f.Leaves, maxDraw)
	upper := min(f.Upper, maxDraw)
	w := float64(max(leaves, upper, 4))*22 + 80
	fmt.Fprintf(b, `<svg id="fabric" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="150" viewBox="0 0 %.0f 150">`, w, w)
	for i := 0; i < upper; i++ {
		x := 40 + float64(i)*w/float64(max(upper, 1))*0.9
		fmt.Fprintf(b, `<rect class="sw spine" x="%.1f" y="15" width="16" height="12" fill="#6c757d"/>`, x)
	}
	for i := 0; i < leaves; i++ {
		x := 40 + float64(i)*w/float64(max(leaves, 1))*0.9
		rail := 0
		if f.Rails > 1 {
			rail = i * f.Rails / max(leaves, 1)
		}
		fmt.Fprintf(b, `<rect class="sw leaf" x="%.1f" y="80" width="16" height="12" fill="hsl(%d,55%%,55%%)"/>`, x, rail*360/max(f.Rails, 1))
	}
	fmt.Fprintf(b, `<text x="4" y="25">%d</text><text x="4" y="90">%d</text>`, f.Upper, f.Leaves)
	fmt.Fprintf(b, `<text x="40" y="125">%d nodes × %d NICs → %d leaves (%d rail(s), %d hosts/leaf), %d upper switch ports</text>`, f.Nodes, f.NICsPerNode, f.Leaves, f.Rails, f.HostsPerLeaf, f.Upper)
	b.WriteString("</svg>\n")
}

// tunerSVG draws one band per collective: a cell per size coloured by the simulated choice, its
// channel count written in it, and every candidate's predicted time in its tooltip.
func tunerSVG(b *strings.Builder, rows []TunerRow) {
	col := map[int64]int{}
	var cols []int64
	for _, r := range rows {
		for _, p := range r.Points {
			if _, ok := col[p.Size]; !ok {
				col[p.Size] = 0
				cols = append(cols, p.Size)
			}
		}
	}
	sort.Slice(cols, func(i, j int) bool { return cols[i] < cols[j] })
	for i, s := range cols {
		col[s] = i
	}
	n := len(cols)
	cw, ch, left, top := 30.0, 30.0, 110.0, 10.0
	W := left + float64(n)*cw + 20
	H := top + float64(len(rows))*(ch+8) + 50
	fmt.Fprintf(b, `<svg id="tuner" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", W, H, W, H)
	for i, r := range rows {
		y := top + float64(i)*(ch+8)
		fmt.Fprintf(b, `<text class="rowlabel" x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+ch/2+4, esc(r.Coll))
		for _, p := range r.Points {
			x := left + float64(col[p.Size])*cw
			var tip strings.Builder
			fmt.Fprintf(&tip, "%s %s (call %s): tuner %s/%s on %d channels", r.Coll, units.FormatSize(p.Bytes), units.FormatSize(p.CallBytes), p.Algo, p.Proto, p.NChannels)
			if p.TimeUs > 0 {
				fmt.Fprintf(&tip, ", predicted %.2f µs", p.TimeUs)
			}
			fmt.Fprintf(&tip, "; simulated %s/%s: %.2f µs", p.SimAlgo, p.SimProto, p.SimUs)
			if len(p.Candidates) > 0 {
				tip.WriteString("\ncandidates (predicted µs):")
				for _, c := range p.Candidates {
					mark := ""
					if c.Algo == p.Algo && c.Proto == p.Proto {
						mark = "  ← chosen"
					}
					fmt.Fprintf(&tip, "\n  %s/%s %.2f%s", c.Algo, c.Proto, c.TimeUs, mark)
				}
			} else {
				tip.WriteString("\n(point-to-point: no cost table, addP2pToPlan rule)")
			}
			if len(p.Alternatives) > 0 {
				tip.WriteString("\nsimulated (GPU µs, fastest first):")
				for _, a := range p.Alternatives {
					if a.Error != "" {
						fmt.Fprintf(&tip, "\n  %s/%s %s", a.Algo, a.Proto, a.Error)
						continue
					}
					mark := ""
					if a.Pick {
						mark = "  ← NCCL's pick"
					}
					fmt.Fprintf(&tip, "\n  %s/%s %.2f%s", a.Algo, a.Proto, a.GPUUs(), mark)
				}
			}
			star := ""
			if p.fasterElsewhere() {
				star = "*"
			}
			fmt.Fprintf(b, `<g class="cell" data-coll="%s" data-bytes="%d" data-tip="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/><text x="%.1f" y="%.1f">%d%s</text></g>`+"\n",
				esc(r.Coll), p.Bytes, esc(tip.String()), x, y, cw-1, ch, choiceColour(p.SimAlgo, p.SimProto), x+cw/2, y+ch/2+4, p.NChannels, star)
		}
	}
	y := top + float64(len(rows))*(ch+8) + 12
	for j, s := range cols {
		if j%2 == 0 {
			fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" transform="rotate(35 %.1f %.1f)">%s</text>`, left+float64(j)*cw+4, y, left+float64(j)*cw+4, y, units.FormatSize(s))
		}
	}
	b.WriteString("</svg>\n")
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"}

// busbwLayout is the geometry of the busbw chart, one for the report's page (busbwSVG) and for
// the files of simccl run --plot (WriteBusbwPlot): the plot area, a log2 size axis labelled every
// other power of two with its unit, five busbw grid lines, one colour per collective (its
// simulated series solid, its measured ones dashed) and the legend in a column of its own right of
// the plot area, which grows to hold it. Coordinates are pixels from the top left.
type busbwLayout struct {
	W, H, l, r, t, bt float64
	xmin, xmax, ymax  float64
	collIdx           map[string]int
}

func newBusbwLayout(series []Series) *busbwLayout {
	g := &busbwLayout{W: 820, H: 380, l: 60, r: 200, t: 15, bt: 45, collIdx: map[string]int{}}
	longest := 0
	for _, s := range series {
		longest = max(longest, len([]rune(s.Name)))
		if _, ok := g.collIdx[s.Coll]; !ok {
			g.collIdx[s.Coll] = len(g.collIdx)
		}
	}
	g.r = max(g.r, 50+6.5*float64(longest)) // legend: a 24-pixel line sample, then the name
	g.W += g.r - 200
	g.H = max(g.H, g.t+10+float64(len(series))*18+g.bt)
	g.xmin, g.xmax = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.Points {
			if p.Bytes <= 0 {
				continue
			}
			lx := math.Log2(float64(p.Bytes))
			g.xmin, g.xmax = math.Min(g.xmin, lx), math.Max(g.xmax, lx)
			g.ymax = math.Max(g.ymax, p.BusBw)
		}
	}
	if math.IsInf(g.xmin, 1) {
		g.xmin, g.xmax = 0, 1
	}
	if g.xmax == g.xmin {
		g.xmax = g.xmin + 1
	}
	if g.ymax <= 0 {
		g.ymax = 1
	}
	g.ymax = niceCeil(g.ymax * 1.05)
	return g
}

func (g *busbwLayout) px(bytes int64) float64 {
	return g.l + (math.Log2(float64(max(bytes, 1)))-g.xmin)/(g.xmax-g.xmin)*(g.W-g.l-g.r)
}

func (g *busbwLayout) py(v float64) float64 { return g.H - g.bt - v/g.ymax*(g.H-g.t-g.bt) }

// yTicks are the busbw grid lines, 0 to ymax.
func (g *busbwLayout) yTicks() []float64 {
	var out []float64
	for i := 0; i <= 5; i++ {
		out = append(out, g.ymax*float64(i)/5)
	}
	return out
}

// xTicks are the sizes labelled: every other power of two.
func (g *busbwLayout) xTicks() []int64 {
	var out []int64
	for e := math.Ceil(g.xmin); e <= g.xmax; e += 2 {
		out = append(out, int64(math.Pow(2, e)))
	}
	return out
}

// colour is a series' colour: its collective's.
func (g *busbwLayout) colour(s Series) string { return palette[g.collIdx[s.Coll]%len(palette)] }

// keyY is the height of the i-th legend line.
func (g *busbwLayout) keyY(i int) float64 { return g.t + 10 + float64(i)*18 }

// busbwSVG plots busbw against size (log2 x axis, busbwLayout): a polyline and one
// <circle class="pt"> per size for each series.
func busbwSVG(b *strings.Builder, series []Series) {
	g := newBusbwLayout(series)
	W, H, l, r, t, bt := g.W, g.H, g.l, g.r, g.t, g.bt
	fmt.Fprintf(b, `<svg id="busbw" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", W, H, W, H)
	for _, v := range g.yTicks() {
		fmt.Fprintf(b, `<line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/><text class="tick" x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", l, W-r, g.py(v), g.py(v), l-5, g.py(v)+4, bw(v))
	}
	for _, size := range g.xTicks() {
		x := g.px(size)
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f"/><text class="tick" x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, x, t, H-bt, x, H-bt+15, units.FormatSize(size))
	}
	fmt.Fprintf(b, `<text class="axis" x="%.0f" y="%.0f" text-anchor="middle">size (bytes)</text><text class="axis" x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">busbw (GB/s)</text>`+"\n", (W-r+l)/2, H-5, H/2, H/2)
	for i, s := range series {
		col := g.colour(s)
		dash := ""
		if s.Measured {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", g.px(p.Bytes), g.py(p.BusBw)))
		}
		fmt.Fprintf(b, `<g class="series" data-series="%s"><polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", esc(s.Name), col, dash, strings.Join(pts, " "))
		for _, p := range s.Points {
			tip := fmt.Sprintf("%s %s: %.2f GB/s busbw, %.2f µs", s.Name, units.FormatSize(p.Bytes), p.BusBw, p.TimeUs)
			if p.Label != "" {
				tip += " (" + p.Label + ")"
			}
			fmt.Fprintf(b, `<circle class="pt" cx="%.1f" cy="%.1f" r="3.5" fill="%s" data-tip="%s"/>`, g.px(p.Bytes), g.py(p.BusBw), col, esc(tip))
		}
		b.WriteString("</g>\n")
		ly := g.keyY(i)
		fmt.Fprintf(b, `<g class="key" data-series="%s"><line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text></g>`+"\n", esc(s.Name), W-r+16, W-r+40, ly, ly, col, dash, W-r+46, ly+4, esc(s.Name))
	}
	b.WriteString("</svg>\n")
}

func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// heatSVG draws one strip per busiest link: utilisation per time bin, white (idle) to dark red
// (saturated).
func heatSVG(b *strings.Builder, f *Focus) {
	left, cw, rh := 260.0, 9.0, 14.0
	W := left + float64(f.Bins)*cw + 70
	H := float64(len(f.Links))*rh + 30
	fmt.Fprintf(b, `<svg id="heat" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", W, H, W, H)
	for i, l := range f.Links {
		y := float64(i) * rh
		fmt.Fprintf(b, `<g class="strip" data-link="%s"><text class="rowlabel" x="%.0f" y="%.1f" text-anchor="end">%s</text>`, esc(l.Name), left-6, y+rh-3, esc(l.Name))
		for k, u := range l.Bins {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" data-tip="%s"/>`, left+float64(k)*cw, y, cw, rh-2, heatColour(u),
				esc(fmt.Sprintf("%s, %.1f–%.1f µs: %.0f%% of %s GB/s", l.Name, f.TimeUs*float64(k)/float64(f.Bins), f.TimeUs*float64(k+1)/float64(f.Bins), 100*u, bw(l.GBps))))
		}
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f">%.0f%%</text></g>`+"\n", left+float64(f.Bins)*cw+6, y+rh-3, 100*l.Util)
	}
	fmt.Fprintf(b, `<text class="tick" x="%.0f" y="%.0f">0 µs</text><text class="tick" x="%.0f" y="%.0f" text-anchor="end">%.1f µs</text>`, left, H-8, left+float64(f.Bins)*cw, H-8, f.TimeUs)
	b.WriteString("</svg>\n")
}

func heatColour(u float64) string {
	u = math.Max(0, math.Min(1, u))
	return fmt.Sprintf("hsl(%0.f,85%%,%.0f%%)", 50-50*u, 97-60*u)
}

// timelineSVG draws the P2P ops of the first ranks and channels, one row each.
func timelineSVG(b *strings.Builder, f *Focus) {
	left, rh, w := 110.0, 14.0, 900.0
	W := left + w + 20
	H := float64(len(f.Rows))*rh + 30
	T := f.TimeUs
	if T <= 0 {
		T = 1
	}
	fmt.Fprintf(b, `<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", W, H, W, H)
	for i, r := range f.Rows {
		fmt.Fprintf(b, `<text class="rowlabel" x="%.0f" y="%.1f" text-anchor="end">%s</text><line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/>`+"\n", left-6, float64(i)*rh+rh-3, esc(r), left, left+w, float64(i+1)*rh, float64(i+1)*rh)
	}
	for _, op := range f.Ops {
		x := left + op.StartUs/T*w
		ww := math.Max((op.EndUs-op.StartUs)/T*w, 0.5)
		fmt.Fprintf(b, `<rect class="op" x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" data-tip="%s"/>`, x, float64(op.Row)*rh+1, ww, rh-3, palette[op.Peer%len(palette)],
			esc(fmt.Sprintf("%s → rank %d: %d B, %.2f–%.2f µs", f.Rows[op.Row], op.Peer, op.Bytes, op.StartUs, op.EndUs)))
	}
	fmt.Fprintf(b, "\n"+`<text class="tick" x="%.0f" y="%.0f">0 µs</text><text class="tick" x="%.0f" y="%.0f" text-anchor="end">%.1f µs</text>`, left, H-8, left+w, H-8, f.TimeUs)
	b.WriteString("</svg>\n")
}

// mib formats bytes in MiB (GiB above 10 GiB).
func mib(b int64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// short cuts a label to n runes (the whole label is in the tooltip).
func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
