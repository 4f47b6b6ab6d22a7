package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/simnet"
)

// WriteBusbwPlot writes the report's busbw chart (busbwLayout: log2 size axis with units, one
// colour per collective, measured series dashed, the legend right of the plot area) as a file of
// its own, format "svg" or "png", with title above it: what simccl run --plot writes. One layout
// serves the page and the file; the file is drawn through gonum/plot's canvases (vgsvg, vgimg),
// the page as SVG markup with the hover tips its script reads.
func WriteBusbwPlot(w io.Writer, title string, series []Series, format string) error {
	g := newBusbwLayout(series)
	const titleH = 24.0 // the title's band above the chart
	width, height := vg.Length(g.W), vg.Length(g.H+titleH)
	var c vg.CanvasWriterTo
	switch strings.ToLower(format) {
	case "svg":
		c = vgsvg.New(width, height)
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))}
	default:
		return fmt.Errorf("report: plot format %q (want png or svg)", format)
	}
	dc := draw.New(c)
	// at turns the layout's pixels (from the top left, below the title) into the canvas's points
	// (from the bottom left).
	at := func(x, y float64) vg.Point { return vg.Point{X: vg.Length(x), Y: height - vg.Length(titleH+y)} }
	face := func(size float64) font.Font {
		f := plot.DefaultFont
		f.Variant, f.Size = "Sans", vg.Length(size)
		return f
	}
	textStyle := func(size float64, col color.Color, xa text.XAlignment) draw.TextStyle {
		return draw.TextStyle{Color: col, Font: face(size), XAlign: xa, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
	}
	grey, grid, dark := hexColour("#555555"), hexColour("#eeeeee"), hexColour("#222222")
	if title != "" {
		dc.FillText(textStyle(13, dark, draw.XCenter), vg.Point{X: width / 2, Y: height - vg.Length(titleH/2+2)}, title)
	}
	for _, v := range g.yTicks() {
		y := g.py(v)
		dc.StrokeLine2(draw.LineStyle{Color: grid, Width: 1}, at(g.l, y).X, at(g.l, y).Y, at(g.W-g.r, y).X, at(g.W-g.r, y).Y)
		dc.FillText(textStyle(10, grey, draw.XRight), at(g.l-5, y), bw(v))
	}
	for _, size := range g.xTicks() {
		x := g.px(size)
		dc.StrokeLine2(draw.LineStyle{Color: grid, Width: 1}, at(x, g.t).X, at(x, g.t).Y, at(x, g.H-g.bt).X, at(x, g.H-g.bt).Y)
		dc.FillText(textStyle(10, grey, draw.XCenter), at(x, g.H-g.bt+11), units.FormatSize(size))
	}
	dc.FillText(textStyle(11, dark, draw.XCenter), at((g.W-g.r+g.l)/2, g.H-9), "size (bytes)")
	ylabel := textStyle(11, dark, draw.XCenter)
	ylabel.Rotation = math.Pi / 2
	dc.FillText(ylabel, at(14, g.H/2), "busbw (GB/s)")
	for i, s := range series {
		col := hexColour(g.colour(s))
		line := draw.LineStyle{Color: col, Width: 2}
		if s.Measured {
			line.Dashes = []vg.Length{6, 4}
		}
		var pts []vg.Point
		for _, p := range s.Points {
			pts = append(pts, at(g.px(p.Bytes), g.py(p.BusBw)))
		}
		if len(pts) > 1 {
			dc.StrokeLines(line, pts)
		}
		for _, pt := range pts {
			dc.DrawGlyph(draw.GlyphStyle{Color: col, Radius: 3.5, Shape: draw.CircleGlyph{}}, pt)
		}
		ly := g.keyY(i)
		dc.StrokeLine2(line, at(g.W-g.r+16, ly).X, at(0, ly).Y, at(g.W-g.r+40, ly).X, at(0, ly).Y)
		dc.FillText(textStyle(11, dark, draw.XLeft), at(g.W-g.r+46, ly), s.Name)
	}
	_, err := c.WriteTo(w)
	return err
}

// hexColour reads "#rrggbb".
func hexColour(s string) color.Color {
	v, _ := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

// SeriesOfRows makes the busbw series of simulated rows as the report's section 3 draws them:
// one per collective, in the rows' order, named "sim " and the collective; a row of no element
// (all_gather of 8 bytes on 8 ranks) or no time is not a point, as in the report.
func SeriesOfRows(rows []simnet.Row) []Series {
	idx := map[string]int{}
	var out []Series
	for _, r := range rows {
		if r.Bytes <= 0 || r.TimeUs <= 0 {
			continue
		}
		i, ok := idx[r.Coll]
		if !ok {
			i = len(out)
			idx[r.Coll] = i
			out = append(out, Series{Name: "sim " + r.Coll, Coll: r.Coll})
		}
		out[i].Points = append(out[i].Points, pointOfRow(r))
	}
	return out
}

// pointOfRow is the busbw point of a simulated row, labelled with its plan.
func pointOfRow(r simnet.Row) BWPoint {
	return BWPoint{Bytes: r.Bytes, TimeUs: r.TimeUs, BusBw: r.BusBw, Label: fmt.Sprintf("%s/%s/%d ch", r.Algo, r.Proto, r.NChannels)}
}
