package simnet

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one line of a busbw plot (e.g. one collective, simulated or measured).
type Series struct {
	Name   string
	Points [][2]float64 // (bytes, busbw GB/s)
}

// SeriesFromRows groups rows by collective, with prefix before each name ("sim " …).
func SeriesFromRows(rows []Row, prefix string) []Series {
	idx := map[string]int{}
	var out []Series
	for _, r := range rows {
		i, ok := idx[r.Coll]
		if !ok {
			i = len(out)
			idx[r.Coll] = i
			out = append(out, Series{Name: prefix + r.Coll})
		}
		out[i].Points = append(out[i].Points, [2]float64{float64(r.Bytes), r.BusBw})
	}
	return out
}

type log2Ticks struct{}

func (log2Ticks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log2(min)); e <= math.Ceil(math.Log2(max)); e++ {
		v := math.Exp2(e)
		label := ""
		if int(e)%3 == 0 || int(e)%10 == 0 {
			label = sizeLabel(v)
		}
		ts = append(ts, plot.Tick{Value: v, Label: label})
	}
	return ts
}

func sizeLabel(v float64) string {
	b := int64(v)
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%dK", b>>10)
	}
	return fmt.Sprint(b)
}

// WritePlot draws busbw against size (log2 x axis) for every series and writes it as format
// "png" or "svg".
func WritePlot(w io.Writer, title string, series []Series, format string) error {
	format = strings.ToLower(format)
	if format != "png" && format != "svg" {
		return fmt.Errorf("simnet: plot format %q (want png or svg)", format)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "size (bytes)"
	p.Y.Label.Text = "busbw (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = log2Ticks{}
	p.Legend.Top = true
	p.Legend.Left = true
	sort.SliceStable(series, func(i, j int) bool { return series[i].Name < series[j].Name })
	for i, s := range series {
		var xy plotter.XYs
		for _, pt := range s.Points {
			if pt[0] > 0 {
				xy = append(xy, plotter.XY{X: pt[0], Y: pt[1]})
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		c := plotutilColor(i)
		l.Color, pts.Color = c, c
		pts.Shape = draw.CircleGlyph{}
		if strings.HasPrefix(s.Name, "measured") {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.Name, l, pts)
	}
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

func plotutilColor(i int) color.Color { return plotutil.Color(i) }
