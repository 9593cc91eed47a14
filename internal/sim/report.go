package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/strata-storage/strata/internal/chart"
	"github.com/strata-storage/strata/internal/sched"
)

// WriteBound prints the analytic model: every term, the binding one
// marked.
func WriteBound(w io.Writer, name string, b BoundResult) error {
	fmt.Fprintf(w, "%s (%s)\n", name, b.Op)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	unit := "MB/s"
	if b.Unit != "" {
		unit = b.Unit
	}
	fmt.Fprintf(tw, "TERM\t%s\tWHAT\n", unit)
	for _, t := range b.Terms {
		mark := ""
		if t.Binding {
			mark = "  ← binds"
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s%s\n", t.Name, t.MBps, t.What, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "S = %.2f %s, bound by %s\n", b.MBps, unit, b.Binding)
	return err
}

// WriteResult prints one run.
func WriteResult(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "%s\n", r.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if x := r.Recall; x != nil {
		fmt.Fprintf(tw, "recalled\t%.2f MB/s\t%d files, %s in %s simulated\n", x.MBps, x.Files, chart.SizeStr(x.Bytes), hms(x.Seconds))
		fmt.Fprintf(tw, "latency\tmean %s\tp50 %s, p95 %s, p99 %s, max %s\n", hms(x.Mean), hms(x.P50), hms(x.P95), hms(x.P99), hms(x.Max))
		fmt.Fprintf(tw, "drives\t%d mounts, %d locates, %d gaps read through\ttime mounting %.1f%%, positioning %.1f%%, streaming %.1f%%, server %.1f%%, idle %.1f%%\n",
			x.Mounts, x.Locates, x.ReadThroughs, 100*x.Mounting, 100*x.Positioning, 100*x.Transfer, 100*x.Overhead, 100*x.Idle)
		if x.BadMounts+x.DrivesFailed+x.Lost > 0 {
			fmt.Fprintf(tw, "failures\t%d bad mounts, %d drives failed\t%d recalls served from another copy, %d lost (no readable copy)\n", x.BadMounts, x.DrivesFailed, x.FromCopy, x.Lost)
		}
		if x.MountFailures > 0 {
			fmt.Fprintf(tw, "robot\t%d mounts failed\t%d cartridges given up after %d rounds\n", x.MountFailures, x.GaveUp, sched.MaxMountFailures)
		}
		if x.RecopySeconds > 0 {
			fmt.Fprintf(tw, "recopy\t%s\t%s read back from another copy and written to new cartridges, from the first bad mount\n", hms(x.RecopySeconds), chart.SizeStr(x.RecopyBytes))
		}
		fmt.Fprintf(tw, "bound\t%.2f MB/s\tbinding term %s (DES/bound = %.3f)\n", r.Bound.MBps, r.Bound.Binding, ratio(r.MBps, r.Bound.MBps))
		fmt.Fprintf(tw, "events\t%d\tfingerprint %s, seed %d\n", r.Events, r.Fingerprint, r.Seed)
		return tw.Flush()
	}
	if x := r.Site; x != nil {
		writeSite(tw, r, x)
		return tw.Flush()
	}
	if x := r.Meta; x != nil {
		fmt.Fprintf(tw, "%s\t%.0f ops/s\t%d clients, %d operations in %.3f s simulated; latency mean %.0f µs\n", r.Op, x.PerS, r.Streams, x.Ops, r.Seconds, x.MeanUS)
		if x.Groups > 0 {
			fmt.Fprintf(tw, "commits\t%.2f per group\t%d groups; writer %.0f%% busy\n", x.PerSync, x.Groups, 100*x.WriterBusy)
		}
		fmt.Fprintf(tw, "cores\t%.0f%% busy\t\n", 100*x.CoresBusy)
		fmt.Fprintf(tw, "bound\t%.0f ops/s\tbinding term %s (DES/bound = %.3f)\n", r.Bound.MBps, r.Bound.Binding, ratio(x.PerS, r.Bound.MBps))
		fmt.Fprintf(tw, "events\t%d\tfingerprint %s, seed %d\n", r.Events, r.Fingerprint, r.Seed)
		return tw.Flush()
	}
	if x := r.Migrate; x != nil {
		fmt.Fprintf(tw, "migrated\t%.2f MB/s\t%d files, %s in %d tape files on %d cartridges, %d passes; %s from the first file to the last on tape\n",
			x.MBps, x.Files, chart.SizeStr(x.Bytes), x.TapeFiles, x.Cartridges, x.Passes, hms(x.Seconds))
		fmt.Fprintf(tw, "time to tape\tmean %s\tp95 %s, max %s (creation to the flush after it)\n", hms(x.Mean), hms(x.P95), hms(x.Max))
		fmt.Fprintf(tw, "drives\t%d mounts, %d flushes\ttime mounting %.1f%%, positioning %.1f%%, streaming %.1f%%, idle %.1f%% (while passes run)\n",
			x.Mounts, x.Flushes, 100*x.Mounting, 100*x.Positioning, 100*x.Transfer, 100*x.Idle)
		fmt.Fprintf(tw, "bound\t%.2f MB/s\tbinding term %s (DES/bound = %.3f)\n", r.Bound.MBps, r.Bound.Binding, ratio(r.MBps, r.Bound.MBps))
		fmt.Fprintf(tw, "events\t%d\tfingerprint %s, seed %d\n", r.Events, r.Fingerprint, r.Seed)
		return tw.Flush()
	}
	fmt.Fprintf(tw, "aggregate\t%.2f MB/s\t%d streams, %s %s in %.3f s simulated, %.0f requests/s\n", r.MBps, r.Streams, r.Op, chart.SizeStr(r.Bytes), r.Seconds, r.IOPS)
	if r.ReadMBps > 0 && r.WriteMBps > 0 && len(r.Groups) == 0 {
		fmt.Fprintf(tw, "readers\t%.2f MB/s\t\n", r.ReadMBps)
		fmt.Fprintf(tw, "writers\t%.2f MB/s\t\n", r.WriteMBps)
	}
	fmt.Fprintf(tw, "per stream\t%s\tMB/s\n", floats(r.PerStream, 8))
	for _, g := range r.Groups {
		on := g.Class
		if g.From != "" {
			on = g.From + " → " + g.Class
		}
		fmt.Fprintf(tw, "group %s\t%.2f MB/s\t%d streams, %s on %s; alone its bound is %.2f MB/s (%s)\n", g.Name, g.MBps, g.Streams, g.Op, on, g.Alone, g.AloneBinding)
	}
	fmt.Fprintf(tw, "bound\t%.2f MB/s\tbinding term %s (DES/bound = %.3f)\n", r.Bound.MBps, r.Bound.Binding, ratio(r.MBps, r.Bound.MBps))
	if r.Busiest != "" {
		fmt.Fprintf(tw, "busiest\t%s\t\n", r.Busiest)
	}
	if x := r.Rebuild; x != nil {
		if x.HealthyMBps > 0 {
			fmt.Fprintf(tw, "healthy\t%.2f MB/s\tusers, before the failure\n", x.HealthyMBps)
		}
		fmt.Fprintf(tw, "degraded\t%.2f MB/s\tusers, for %s from the failure of %d member(s) in each of %d arrays at %s\n", x.UserMBps, hms(x.Window), x.Failed, x.Arrays, hms(x.FailedAt))
		if x.Seconds > 0 {
			fmt.Fprintf(tw, "rebuild\t%s\t%.2f MB/s per spare\n", hms(x.Seconds), x.MemberMBps)
		}
	}
	fmt.Fprintf(tw, "events\t%d\tfingerprint %s, seed %d\n", r.Events, r.Fingerprint, r.Seed)
	return tw.Flush()
}

// writeSite prints a site study's run.
func writeSite(tw io.Writer, r *Result, x *SiteResult) {
	fmt.Fprintf(tw, "ingest\t%.2f MB/s offered\t%d files, %s over %s; wait to disk mean %s, p95 %s, max %s\n",
		x.OfferedMBps, x.Files, chart.SizeStr(x.Bytes), hms(x.Seconds), hms(x.IngestMean), hms(x.IngestP95), hms(x.IngestMax))
	fmt.Fprintf(tw, "disk tier\t%.0f%% busy\tpeak %s waiting for tape; users read %s\n", 100*x.DiskBusy, chart.SizeStr(x.BacklogPeak), chart.SizeStr(x.UserBytes))
	if x.RebuildMean > 0 || x.RebuildBacklog > 0 {
		fmt.Fprintf(tw, "array rebuild\twait to disk mean %s\tpeak %s waiting for tape, for the files arriving while it ran\n", hms(x.RebuildMean), chart.SizeStr(x.RebuildBacklog))
	}
	if m := x.Migrate; m != nil {
		fmt.Fprintf(tw, "migration\t%.2f MB/s\t%d tape files on %d cartridges; time to tape mean %s, p95 %s, max %s\n",
			m.MBps, m.TapeFiles, m.Cartridges, hms(m.Mean), hms(m.P95), hms(m.Max))
	}
	if c := x.Recall; c != nil {
		fmt.Fprintf(tw, "recalls\t%d files\t%s; wait mean %s, p95 %s, max %s\n", c.Files, chart.SizeStr(c.Bytes), hms(c.Mean), hms(c.P95), hms(c.Max))
	}
	fmt.Fprintf(tw, "drives\t%.1f%% migrating\t%.1f%% recalling (of drives × the run), %d mounts\n", 100*x.Migrating, 100*x.Recalling, x.Migrate.Mounts)
	fmt.Fprintf(tw, "bound\t%.2f MB/s\tbinding term %s (sustained ingest the site can migrate)\n", r.Bound.MBps, r.Bound.Binding)
	fmt.Fprintf(tw, "events\t%d\tfingerprint %s, seed %d\n", r.Events, r.Fingerprint, r.Seed)
}

// hms prints seconds as a duration people read ("1h2m3s", "4.2s").
func hms(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	if d >= time.Minute {
		d = d.Round(time.Second)
	} else {
		d = d.Round(time.Millisecond)
	}
	return d.String()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func floats(v []float64, max int) string {
	var s []string
	for i, x := range v {
		if i == max {
			s = append(s, fmt.Sprintf("… (%d)", len(v)))
			break
		}
		s = append(s, strconv.FormatFloat(x, 'f', 2, 64))
	}
	return strings.Join(s, " ")
}

// WriteSweepTable prints one row per point.
func WriteSweepTable(w io.Writer, r *SweepResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	recall := r.recall()
	head := append(append([]string{}, r.Keys...), "MB/s", "read MB/s", "write MB/s", "bound", "binds", "events", "")
	rebuild := r.rebuild()
	site := r.site()
	meta := r.meta()
	groups := r.groups()
	switch {
	case meta:
		head = append(append([]string{}, r.Keys...), "ops/s", "latency µs", "per group", "cores busy", "bound", "binds", "events", "")
	case site:
		head = append(append([]string{}, r.Keys...), "MB/s offered", "to tape mean", "p95", "max", "backlog peak", "recall wait", "p95", "migrating", "recalling", "mounts", "events", "")
	case recall:
		head = append(append([]string{}, r.Keys...), "MB/s", "mean wait", "p95 wait", "max wait", "mounts", "bound", "events", "")
		if r.tapeFailures() {
			head = append(head[:len(head)-1], "from copy", "lost", "recopy", "")
		}
	case rebuild:
		head = append(append([]string{}, r.Keys...), "MB/s", "healthy MB/s", "degraded MB/s", "rebuild", "spare MB/s", "bound", "binds", "events", "")
	case len(groups) > 0:
		head = append(append([]string{}, r.Keys...), "MB/s")
		for _, g := range groups {
			head = append(head, g+" MB/s")
		}
		head = append(head, "bound", "binds", "events", "")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, p := range r.Points {
		var row []string
		for _, k := range r.Keys {
			row = append(row, p.Set[k])
		}
		if p.Error != "" {
			row = append(row, "error: "+p.Error)
		} else {
			x := p.Result
			if mt := x.Meta; mt != nil {
				row = append(row, fmt.Sprintf("%.0f", mt.PerS), fmt.Sprintf("%.0f", mt.MeanUS), f2(mt.PerSync), fmt.Sprintf("%.0f%%", 100*mt.CoresBusy), fmt.Sprintf("%.0f", x.Bound.MBps), x.Bound.Binding, strconv.FormatUint(x.Events, 10))
			} else if st := x.Site; st != nil {
				row = append(row, f2(st.OfferedMBps), hms(st.Migrate.Mean), hms(st.Migrate.P95), hms(st.Migrate.Max), chart.SizeStr(st.BacklogPeak))
				if c := st.Recall; c != nil {
					row = append(row, hms(c.Mean), hms(c.P95))
				} else {
					row = append(row, "", "")
				}
				row = append(row, fmt.Sprintf("%.1f%%", 100*st.Migrating), fmt.Sprintf("%.1f%%", 100*st.Recalling), strconv.Itoa(st.Migrate.Mounts), strconv.FormatUint(x.Events, 10))
			} else if mean, p95, mx, mounts, ok := tapeSummary(x); ok {
				row = append(row, f2(x.MBps), hms(mean), hms(p95), hms(mx), strconv.Itoa(mounts), f2(x.Bound.MBps), strconv.FormatUint(x.Events, 10))
				if rc := x.Recall; rc != nil && r.tapeFailures() {
					row = append(row, strconv.Itoa(rc.FromCopy), strconv.Itoa(rc.Lost), hms(rc.RecopySeconds))
				}
			} else if rb := x.Rebuild; rebuild && rb != nil {
				row = append(row, f2(x.MBps), f2(rb.HealthyMBps), f2(rb.UserMBps), hms(rb.Seconds), f2(rb.MemberMBps), f2(x.Bound.MBps), x.Bound.Binding, strconv.FormatUint(x.Events, 10))
			} else if len(groups) > 0 {
				row = append(row, f2(x.MBps))
				for _, g := range x.Groups {
					row = append(row, f2(g.MBps))
				}
				row = append(row, f2(x.Bound.MBps), x.Bound.Binding, strconv.FormatUint(x.Events, 10))
			} else {
				row = append(row, f2(x.MBps), f2(x.ReadMBps), f2(x.WriteMBps), f2(x.Bound.MBps), x.Bound.Binding, strconv.FormatUint(x.Events, 10))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d points in %.2f s (seed %d)\n", len(r.Points), r.WallSeconds, r.Seed)
	return err
}

// recall says whether the sweep is of tape runs (recall or migration).
func (r *SweepResult) recall() bool {
	for _, p := range r.Points {
		if p.Result != nil {
			_, _, _, _, ok := tapeSummary(p.Result)
			return ok
		}
	}
	return false
}

// tapeFailures says whether the sweep's recalls met bad cartridges or
// failed drives.
func (r *SweepResult) tapeFailures() bool {
	for _, p := range r.Points {
		if x := p.Result; x != nil && x.Recall != nil && x.Recall.BadMounts+x.Recall.DrivesFailed+x.Recall.Lost > 0 {
			return true
		}
	}
	return false
}

// meta says whether the sweep is of metadata studies.
func (r *SweepResult) meta() bool {
	for _, p := range r.Points {
		if p.Result != nil {
			return p.Result.Meta != nil
		}
	}
	return false
}

// site says whether the sweep is of site studies.
func (r *SweepResult) site() bool {
	for _, p := range r.Points {
		if p.Result != nil {
			return p.Result.Site != nil
		}
	}
	return false
}

// groups is the names of the sweep's client groups; nil without groups.
func (r *SweepResult) groups() []string {
	for _, p := range r.Points {
		if p.Result != nil {
			var n []string
			for _, g := range p.Result.Groups {
				n = append(n, g.Name)
			}
			return n
		}
	}
	return nil
}

// rebuild says whether the sweep's runs had failed array members.
func (r *SweepResult) rebuild() bool {
	for _, p := range r.Points {
		if p.Result != nil && p.Result.Rebuild != nil {
			return true
		}
	}
	return false
}

// tapeSummary is a tape run's waits (recall: request to disk; migration:
// creation to tape) and mounts.
func tapeSummary(r *Result) (mean, p95, max float64, mounts int, ok bool) {
	if c := r.Recall; c != nil {
		return c.Mean, c.P95, c.Max, c.Mounts, true
	}
	if c := r.Migrate; c != nil {
		return c.Mean, c.P95, c.Max, c.Mounts, true
	}
	if x := r.Site; x != nil && x.Migrate != nil {
		return x.Migrate.Mean, x.Migrate.P95, x.Migrate.Max, x.Migrate.Mounts, true
	}
	return 0, 0, 0, 0, false
}

func f2(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// WriteSweepCSV writes one row per point.
func WriteSweepCSV(w io.Writer, r *SweepResult) error {
	cw := csv.NewWriter(w)
	head := append(append([]string{}, r.Keys...), "mb_per_s", "read_mb_per_s", "write_mb_per_s", "bound_mb_per_s", "binding_term", "events", "fingerprint", "error",
		"latency_mean_s", "latency_p95_s", "latency_max_s", "mounts", "ops_per_s", "healthy_mb_per_s", "degraded_mb_per_s", "rebuild_s")
	groups := r.groups()
	for _, g := range groups {
		head = append(head, g+"_mb_per_s")
	}
	cw.Write(head)
	for _, p := range r.Points {
		var row []string
		for _, k := range r.Keys {
			row = append(row, p.Set[k])
		}
		if x := p.Result; x != nil {
			row = append(row, ftoa(x.MBps), ftoa(x.ReadMBps), ftoa(x.WriteMBps), ftoa(x.Bound.MBps), x.Bound.Binding, strconv.FormatUint(x.Events, 10), x.Fingerprint, "")
			if mean, p95, mx, mounts, ok := tapeSummary(x); ok {
				row = append(row, ftoa(mean), ftoa(p95), ftoa(mx), strconv.Itoa(mounts))
			} else {
				row = append(row, "", "", "", "")
			}
			row = append(row, ftoa(x.IOPS))
			if rb := x.Rebuild; rb != nil {
				row = append(row, ftoa(rb.HealthyMBps), ftoa(rb.UserMBps), ftoa(rb.Seconds))
			} else {
				row = append(row, "", "", "")
			}
			for _, g := range x.Groups {
				row = append(row, ftoa(g.MBps))
			}
		} else {
			row = append(row, "", "", "", "", "", "", "", p.Error, "", "", "", "", "", "", "", "")
			row = append(row, make([]string, len(groups))...)
		}
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// WriteJSON writes v (a Result, BoundResult or SweepResult) as indented
// JSON.
func WriteJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// numeric reads a sweep value as a number for a chart axis: sizes and
// rates by their unit, durations in seconds, plain numbers as they are.
func numeric(v string) (float64, bool) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f, true
	}
	var s Size
	if err := s.UnmarshalText([]byte(v)); err == nil {
		return float64(s), true
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d.Seconds(), true
	}
	return 0, false
}

// recallMetric is a recall run's value of a latency or mount metric.
func recallMetric(r *Result, metric string) (float64, bool) {
	mean, p95, _, mounts, ok := tapeSummary(r)
	if !ok {
		return 0, false
	}
	switch metric {
	case "latency_mean":
		return mean, true
	case "latency_p95":
		return p95, true
	case "mounts":
		return float64(mounts), true
	case "recopy_hours":
		if x := r.Recall; x != nil && x.RecopySeconds > 0 {
			return x.RecopySeconds / 3600, true
		}
	}
	return 0, false
}

// rebuildMetric is a run's value of a rebuild metric: the users' MB/s
// while degraded, or the rebuild's hours.
func rebuildMetric(r *Result, metric string) (float64, bool) {
	x := r.Rebuild
	switch {
	case x == nil:
		return 0, false
	case metric == "degraded":
		return x.UserMBps, true
	case metric == "rebuild_hours":
		return x.Seconds / 3600, true
	}
	return 0, false
}

// SweepChart draws the sweep: MB/s against the x key, one curve per value
// of the series key (and, for mixed workloads, readers and writers
// apart), with the analytic bound dashed when there is no series key.
func (s *Study) SweepChart(r *SweepResult, title string) (chart.Chart, error) {
	x := s.Plot.X
	if x == "" && len(r.Keys) > 0 {
		x = r.Keys[len(r.Keys)-1]
	}
	series := s.Plot.Series
	logX := true
	if s.Plot.LogX != nil {
		logX = *s.Plot.LogX
	}
	byName := map[string]*chart.Series{}
	var order []string
	add := func(name string, xv, y float64) {
		if y <= 0 || math.IsNaN(y) {
			return
		}
		c, ok := byName[name]
		if !ok {
			c = &chart.Series{Name: name}
			byName[name] = c
			order = append(order, name)
		}
		c.Pts = append(c.Pts, plotter.XY{X: xv, Y: y})
	}
	for _, p := range r.Points {
		if p.Result == nil {
			continue
		}
		xv, ok := numeric(p.Set[x])
		if !ok {
			continue
		}
		name := "DES"
		if series != "" {
			name = series + "=" + p.Set[series]
		}
		res := p.Result
		div := func(n int) float64 {
			if s.Plot.Metric == "per_stream" && n > 0 {
				return float64(n)
			}
			return 1
		}
		if s.Plot.Metric == "iops" {
			add(name, xv, res.IOPS)
			continue
		}
		if s.Plot.Metric == "groups" {
			for _, g := range res.Groups {
				add(name+" "+g.Name, xv, g.MBps)
			}
			if series == "" {
				add("bound", xv, res.Bound.MBps)
			}
			continue
		}
		if y, ok := rebuildMetric(res, s.Plot.Metric); ok {
			add(name, xv, y)
			continue
		}
		if y, ok := recallMetric(res, s.Plot.Metric); ok {
			add(name, xv, y)
			continue
		}
		if res.ReadMBps > 0 && res.WriteMBps > 0 {
			// mixed: even streams write, odd ones read
			w := (res.Streams + 1) / 2
			add(name+" read", xv, res.ReadMBps/div(res.Streams-w))
			add(name+" write", xv, res.WriteMBps/div(w))
		} else {
			add(name, xv, res.MBps/div(res.Streams))
		}
		if series == "" && s.Plot.Metric != "per_stream" {
			add("bound", xv, p.Result.Bound.MBps)
		}
	}
	var ss []chart.Series
	for _, n := range order {
		ss = append(ss, *byName[n])
	}
	xl := x
	if title == "" {
		title = r.Name
	}
	yl := "MB/s"
	switch s.Plot.Metric {
	case "per_stream":
		yl = "MB/s per stream"
	case "groups":
		yl = "MB/s, each client group"
	case "latency_mean":
		yl = "mean wait, s (recall: to disk; migration: to tape)"
	case "latency_p95":
		yl = "p95 wait, s"
	case "mounts":
		yl = "mounts"
	case "iops":
		yl = "requests/s"
	case "degraded":
		yl = "users' MB/s while degraded"
	case "rebuild_hours":
		yl = "rebuild, hours"
	case "recopy_hours":
		yl = "hours until the second copy is back"
	}
	return chart.Line(title, xl, yl, ss, logX, false)
}
