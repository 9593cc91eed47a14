// Package chart draws the SVG line charts of Strata's reports (strata
// bench's HTML report, strata sim's sweeps) with gonum/plot, so both tools'
// figures look alike and the code exists once.
package chart

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one SVG figure of the HTML report.
type Chart struct {
	Title string
	SVG   template.HTML
}

// Series is one curve: points sorted by x.
type Series struct {
	Name string
	Pts  plotter.XYs
}

// Line draws curves with a log-2 x axis when logX (sizes, counts).
func Line(title, xlabel, ylabel string, ss []Series, logX, logY bool) (Chart, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = SizeTicks{}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for i, s := range ss {
		if len(s.Pts) == 0 {
			continue
		}
		sort.Slice(s.Pts, func(a, b int) bool { return s.Pts[a].X < s.Pts[b].X })
		l, pts, err := plotter.NewLinePoints(s.Pts)
		if err != nil {
			return Chart{}, err
		}
		c := Palette[i%len(Palette)]
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		if strings.Contains(s.Name, "bound") {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			pts.Radius = 0
		}
		p.Add(l, pts)
		p.Legend.Add(s.Name, l, pts)
	}
	return Render(title, p)
}

// Render turns a plot into an SVG chart.
func Render(title string, p *plot.Plot) (Chart, error) {
	wt, err := p.WriterTo(7*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return Chart{}, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return Chart{}, err
	}
	svg := b.String()
	if i := strings.Index(svg, "<svg"); i > 0 { // drop the XML prolog inside HTML
		svg = svg[i:]
	}
	return Chart{Title: title, SVG: template.HTML(svg)}, nil
}

// Palette is the curves' colours, in order.
var Palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255}, color.RGBA{214, 39, 40, 255},
	color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255}, color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255},
}

// SizeTicks marks powers of two with byte units (or plain counts below
// 1 KiB).
type SizeTicks struct{}

func (SizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log2(lo)); math.Pow(2, e) <= hi*1.0001; e++ {
		v := math.Pow(2, e)
		if v < lo*0.9999 {
			continue
		}
		label := ""
		if int(e)%2 == 0 || hi/lo < 64 {
			label = SizeStr(int64(v))
			if v < 1024 {
				label = fmt.Sprint(int64(v))
			}
		}
		ts = append(ts, plot.Tick{Value: v, Label: label})
	}
	return ts
}

// SizeStr prints a byte count with a binary unit: 4KiB, 160MiB, 2GiB.
func SizeStr(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
