package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"

	"github.com/strata-storage/strata/internal/chart"
	"gonum.org/v1/plot/plotter"
)

// Chart is one SVG figure of the HTML report.
type Chart = chart.Chart

type series = chart.Series

// charts draws what the report holds: throughput against size for
// sweeps, scaling curves with their bound, and latency percentiles.
func (rep *Report) charts() ([]Chart, error) {
	var out []Chart
	for _, res := range rep.Results {
		var cs []Chart
		var err error
		switch res.Scenario {
		case "cemss-char":
			cs, err = sweepChart(res, "I/O size", "")
		case "iozone":
			cs, err = sweepChart(res, "record size", "write")
			if err == nil {
				var more []Chart
				more, err = sweepChart(res, "record size", "read")
				cs = append(cs, more...)
			}
		case "scaling":
			cs, err = scalingCharts(res)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	lat, err := latencyChart(rep)
	if err != nil {
		return nil, err
	}
	return append(out, lat...), nil
}

// sweepChart plots MiB/s against the swept size, a curve per series
// (only those starting with prefix, if given).
func sweepChart(res Result, xlabel, prefix string) ([]Chart, error) {
	ss := curves(res.Phases, prefix)
	if len(ss) == 0 {
		return nil, nil
	}
	title := fmt.Sprintf("%s: throughput against %s", res.Scenario, xlabel)
	if prefix != "" {
		title += " (" + prefix + ")"
	}
	c, err := chart.Line(title, xlabel, "MiB/s", ss, true, false)
	return []Chart{c}, err
}

// curves gathers the MiB/s of the phases on a chart into one curve per
// series, keeping those whose series starts with prefix.
func curves(phases []Phase, prefix string) []series {
	var ss []series
	idx := map[string]int{}
	for _, ph := range phases {
		if ph.Series == "" || ph.Failed() || ph.Skipped != "" || !strings.HasPrefix(ph.Series, prefix) {
			continue
		}
		i, ok := idx[ph.Series]
		if !ok {
			i = len(ss)
			idx[ph.Series] = i
			ss = append(ss, series{Name: ph.Series})
		}
		ss[i].Pts = append(ss[i].Pts, plotter.XY{X: ph.X, Y: ph.MiBps})
	}
	return ss
}

// scalingCharts plots MiB/s against clients, a curve per server count,
// with seed 002's bound dashed.
func scalingCharts(res Result) ([]Chart, error) {
	var out []Chart
	for _, dir := range []string{"write", "read"} {
		ss := curves(res.Phases, dir)
		bounds := map[int]*series{}
		var order []int
		for _, b := range res.Bound {
			if b.Phase != dir || b.Bound == 0 {
				continue
			}
			s := bounds[b.Servers]
			if s == nil {
				s = &series{Name: fmt.Sprintf("bound M=%d", b.Servers)}
				bounds[b.Servers] = s
				order = append(order, b.Servers)
			}
			s.Pts = append(s.Pts, plotter.XY{X: float64(b.Clients), Y: b.Bound})
		}
		for _, m := range order {
			ss = append(ss, *bounds[m])
		}
		if len(ss) == 0 {
			continue
		}
		c, err := chart.Line(fmt.Sprintf("scaling (%s): MiB/s against clients N, per server count M", dir), "clients N", "MiB/s", ss, true, false)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// latencyChart plots each data phase's latency percentiles, one chart for
// transfers and one for metadata operations, up to eight curves each.
func latencyChart(rep *Report) ([]Chart, error) {
	var data, meta []series
	for _, res := range rep.Results {
		for _, ph := range res.Phases {
			if ph.Latency.Count == 0 || ph.Failed() || ph.Series != "" {
				continue
			}
			l := ph.Latency
			s := series{Name: res.Scenario + " " + ph.Name, Pts: plotter.XYs{{X: 50, Y: l.P50}, {X: 90, Y: l.P90}, {X: 99, Y: l.P99}, {X: 99.9, Y: l.P999}}}
			if ph.Bytes > 0 {
				data = append(data, s)
			} else {
				meta = append(meta, s)
			}
		}
	}
	var out []Chart
	for _, g := range []struct {
		title string
		ss    []series
	}{{"latency percentiles: data transfers", data}, {"latency percentiles: metadata operations", meta}} {
		if len(g.ss) == 0 {
			continue
		}
		if len(g.ss) > 8 {
			g.ss = g.ss[:8]
		}
		// Percentiles on a "nines" axis: 50, 90, 99, 99.9 evenly spaced.
		for i := range g.ss {
			for j := range g.ss[i].Pts {
				g.ss[i].Pts[j].X = -math.Log10(1 - g.ss[i].Pts[j].X/100)
			}
		}
		p := plot.New()
		p.Title.Text = g.title
		p.X.Label.Text = "percentile"
		p.Y.Label.Text = "µs"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0.30103, Label: "p50"}, {Value: 1, Label: "p90"}, {Value: 2, Label: "p99"}, {Value: 3, Label: "p99.9"}})
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		for i, s := range g.ss {
			for j := range s.Pts {
				s.Pts[j].Y = max(s.Pts[j].Y, 0.1) // a log axis has no zero
			}
			l, pts, err := plotter.NewLinePoints(s.Pts)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color = chart.Palette[i%len(chart.Palette)], chart.Palette[i%len(chart.Palette)]
			p.Add(l, pts)
			p.Legend.Add(s.Name, l)
		}
		c, err := chart.Render(g.title, p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{"num": num, "size": sizeStr, "keys": sortedKeys}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>strata bench — {{.R.Target.Spec}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.fail{color:#b00;font-weight:bold}.note{color:#555;font-size:.9em}
figure{margin:1em 0}svg{max-width:100%;height:auto}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:bold}
</style></head><body>
<h1>strata bench: {{.R.Target.Spec}}</h1>
<dl>
<dt>target</dt><dd>{{.R.Target.Kind}}, {{.R.Target.FSType}}{{if .R.Target.Server}} — {{.R.Target.Server}}{{end}}{{if .R.Target.Notes}} — {{.R.Target.Notes}}{{end}}</dd>
<dt>writes</dt><dd>{{.R.Target.Durability}}{{if .R.Target.Direct}} (O_DIRECT){{else}} (buffered){{end}}</dd>
<dt>creates</dt><dd>{{.R.Target.MetaDurability}}</dd>
{{if .R.Target.Sink}}<dt>reads</dt><dd>written to a file in {{.R.Target.Sink}} and fsynced, as strata get does</dd>
{{end}}<dt>between write and read</dt><dd>{{.R.Target.Cache}}</dd>
<dt>data check</dt><dd>{{.R.Verify}}</dd>
<dt>host</dt><dd>{{.R.Env.Host}}: {{.R.Env.CPUs}} × {{.R.Env.CPUModel}}, {{size .R.Env.MemBytes}}, {{.R.Env.OS}} {{.R.Env.Kernel}}</dd>
{{range .R.Peers}}<dt>worker process</dt><dd>{{.Host}}: {{.CPUs}} × {{.CPUModel}}, {{size .MemBytes}}, {{.OS}} {{.Kernel}}</dd>
{{end}}
<dt>run</dt><dd>{{.R.Tool}} {{.R.Version}}, scale {{.R.Scale}}, {{.R.WorkersString}}, started {{.R.Started.Format "2006-01-02 15:04:05 UTC"}}, {{printf "%.1f" .R.Seconds}} s, {{.R.Failures}} failed</dd>
</dl>
{{range .Charts}}<figure>{{.SVG}}</figure>
{{end}}
{{range .R.Results}}<h2>{{.Scenario}} — {{.Title}}</h2>
<p class="note">{{.Pattern}}{{$p := .Params}}{{range keys .Params}} · {{.}}={{index $p .}}{{end}}</p>
{{if .Error}}<p class="fail">FAILED: {{.Error}}</p>{{end}}{{if .Skipped}}<p>skipped: {{.Skipped}}</p>{{end}}
<table><tr><th>phase</th><th>workers</th><th>ops</th><th>bytes</th><th>s</th><th>MiB/s</th><th>ops/s</th><th>first done MiB/s</th><th>first done ops/s</th><th>p50 µs</th><th>p99 µs</th><th>p99.9 µs</th></tr>
{{range .Phases}}{{if .Skipped}}<tr><td>{{.Name}}</td><td colspan="11">skipped: {{.Skipped}}</td></tr>{{else}}<tr{{if .Error}} class="fail"{{end}}><td>{{.Name}}{{if .StonewallHit}} ⧗{{end}}</td><td>{{.Workers}}</td><td>{{.Ops}}</td><td>{{size .Bytes}}</td><td>{{printf "%.3f" .Seconds}}</td><td>{{num .MiBps}}</td><td>{{num .OpsPerSec}}</td><td>{{num .MiBpsFirstDone}}</td><td>{{num .OpsPerSecFirstDone}}</td><td>{{printf "%.1f" .Latency.P50}}</td><td>{{printf "%.1f" .Latency.P99}}</td><td>{{printf "%.1f" .Latency.P999}}</td></tr>{{if .Error}}<tr class="fail"><td colspan="12">{{.Error}}</td></tr>{{end}}{{end}}
{{end}}</table>
{{range .Bound}}<p class="note">bound {{.Phase}} N={{.Clients}} M={{.Servers}}: measured {{num .Measured}} MiB/s, S = {{num .Bound}} MiB/s ({{.Binding}}), ratio {{printf "%.2f" .Ratio}}</p>{{end}}
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
{{end}}
<p class="note">⧗ = stopped by the stonewall deadline, with wear-out to equal shares. Bandwidth is bytes over barrier-to-last-done; "first done" is what all workers had moved when the first finished.</p>
</body></html>
`))

// WriteHTML writes the report as one self-contained HTML page with its
// charts inline.
func (rep *Report) WriteHTML(w io.Writer) error {
	charts, err := rep.charts()
	if err != nil {
		return fmt.Errorf("bench report charts: %w", err)
	}
	return page.Execute(w, struct {
		R      *Report
		Charts []Chart
	}{rep, charts})
}

// WriteCharts writes every chart of the report as an SVG file in dir and
// returns their names (for documents that embed them).
func (rep *Report) WriteCharts(dir string) ([]string, error) {
	charts, err := rep.charts()
	if err != nil {
		return nil, err
	}
	var names []string
	for i, c := range charts {
		name := fmt.Sprintf("%02d-%s.svg", i+1, slug(c.Title))
		if err := WriteFile(filepath.Join(dir, name), func(w io.Writer) error {
			_, err := io.WriteString(w, string(c.SVG))
			return err
		}); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// slug makes a file name of a title.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
