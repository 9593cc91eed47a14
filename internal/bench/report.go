package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the report for a person: one block per scenario, one
// row per phase.
func (rep *Report) WriteTable(w io.Writer) error {
	kind := rep.Target.Kind
	if rep.Target.FSType != "" {
		kind += ", " + rep.Target.FSType
	}
	fmt.Fprintf(w, "strata bench %s on %s (%s) — scale %s, %s, verify %s\n", rep.Version, rep.Target.Spec, kind, rep.Scale, rep.WorkersString(), rep.Verify)
	fmt.Fprintf(w, "host %s: %d CPUs, %s memory, %s; writes: %s\n", rep.Env.Host, rep.Env.CPUs, sizeStr(rep.Env.MemBytes), rep.Env.Kernel, rep.Target.Durability)
	if rep.Target.Sink != "" {
		fmt.Fprintf(w, "reads: written to a file in %s and fsynced, as strata get does\n", rep.Target.Sink)
	}
	for _, p := range rep.Peers {
		fmt.Fprintf(w, "worker process on %s: %d CPUs, %s memory, %s\n", p.Host, p.CPUs, sizeStr(p.MemBytes), p.Kernel)
	}
	for _, res := range rep.Results {
		fmt.Fprintf(w, "\n%s — %s\n", res.Scenario, res.Title)
		if len(res.Params) > 0 {
			var ps []string
			for _, k := range sortedKeys(res.Params) {
				ps = append(ps, k+"="+res.Params[k])
			}
			fmt.Fprintf(w, "  %s\n", strings.Join(ps, "  "))
		}
		if res.Skipped != "" {
			fmt.Fprintf(w, "  skipped: %s\n", res.Skipped)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  phase\tworkers\tops\tbytes\tsecs\tMiB/s\tops/s\tfirst-done MiB/s\tfirst-done ops/s\tp50 µs\tp99 µs\tp99.9 µs\tCPU µs/op client\tserver\t")
		for _, ph := range res.Phases {
			if ph.Skipped != "" {
				continue // listed below the table
			}
			client, server := ph.CPU.strings()
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%.3f\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", ph.Name, ph.Workers, ph.Ops, sizeStr(ph.Bytes), ph.Seconds,
				num(ph.MiBps), num(ph.OpsPerSec), num(ph.MiBpsFirstDone), num(ph.OpsPerSecFirstDone), ph.Latency.P50, ph.Latency.P99, ph.Latency.P999, client, server)
		}
		tw.Flush()
		for _, ph := range res.Phases {
			if ph.Skipped != "" {
				fmt.Fprintf(w, "  %s: skipped: %s\n", ph.Name, ph.Skipped)
			}
			if len(ph.Repeats) > 1 {
				fmt.Fprintf(w, "  %s: min %s / median %s / max %s ops/s over %d repetitions\n", ph.Name, num(ph.Repeats[0]), num(ph.OpsPerSec), num(ph.Repeats[len(ph.Repeats)-1]), len(ph.Repeats))
			}
			if g := ph.Groups; g != nil {
				fmt.Fprintf(w, "  %s: the catalog committed %d groups, %.2f operations and %.0f µs a group\n", ph.Name, g.Groups, g.OpsPerGroup, g.USPerGroup)
			}
			if ph.StonewallHit {
				fmt.Fprintf(w, "  %s: stopped by the %v deadline (wear-out to equal shares)\n", ph.Name, time.Duration(ph.Deadline*float64(time.Second)))
			}
			if ph.Error != "" {
				fmt.Fprintf(w, "  %s: FAILED: %s\n", ph.Name, ph.Error)
			}
		}
		for _, b := range res.Bound {
			fmt.Fprintf(w, "  bound %s N=%d M=%d: measured %s MiB/s, S = %s MiB/s (%s), ratio %.2f\n", b.Phase, b.Clients, b.Servers, num(b.Measured), num(b.Bound), b.Binding, b.Ratio)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if res.Error != "" {
			fmt.Fprintf(w, "  FAILED: %s\n", res.Error)
		}
	}
	fmt.Fprintf(w, "\n%d scenarios in %.1f s, %d failed\n", len(rep.Results), rep.Seconds, rep.Failures)
	return nil
}

// strings gives the client's and the server's CPU an operation, "-" where
// not measured.
func (c *PhaseCPU) strings() (client, server string) {
	client, server = "-", "-"
	if c == nil {
		return
	}
	client = strconv.FormatFloat(c.Client, 'f', 1, 64)
	if c.Server != nil {
		server = strconv.FormatFloat(*c.Server, 'f', 1, 64)
	}
	return
}

// num prints a rate with sensible precision.
func num(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// WriteJSON writes the report as one JSON document (nothing else goes in
// the file: hpc/ior#102, #503).
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteCSV writes one row per phase.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scenario", "phase", "series", "x", "labels", "workers", "ops", "bytes", "seconds", "mib_per_s", "ops_per_s",
		"first_done_seconds", "mib_per_s_first_done", "ops_per_s_first_done", "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us", "stonewall_hit", "skipped", "error",
		"client_cpu_us_per_op", "server_cpu_us_per_op"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, res := range rep.Results {
		for _, ph := range res.Phases {
			var ls []string
			for _, k := range sortedKeys(ph.Labels) {
				ls = append(ls, k+"="+ph.Labels[k])
			}
			cw.Write([]string{res.Scenario, ph.Name, ph.Series, f(ph.X), strings.Join(ls, ";"), strconv.Itoa(ph.Workers), strconv.FormatInt(ph.Ops, 10),
				strconv.FormatInt(ph.Bytes, 10), f(ph.Seconds), f(ph.MiBps), f(ph.OpsPerSec), f(ph.FirstDone), f(ph.MiBpsFirstDone), f(ph.OpsPerSecFirstDone),
				f(ph.Latency.P50), f(ph.Latency.P90), f(ph.Latency.P99), f(ph.Latency.P999), f(ph.Latency.Max), strconv.FormatBool(ph.StonewallHit), ph.Skipped, ph.Error,
				csvCPU(ph.CPU, false), csvCPU(ph.CPU, true)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadJSON loads a report written by WriteJSON.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("bench report: %w", err)
	}
	return &rep, nil
}

// WriteFile writes the report to path with one of the writers, through a
// temporary file so a reader never sees half a report.
func WriteFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WorkersString says how many workers ran, and in how many processes.
func (rep *Report) WorkersString() string {
	if rep.Procs > 1 {
		return fmt.Sprintf("%d workers in %d processes", rep.Workers, rep.Procs)
	}
	return fmt.Sprintf("%d workers", rep.Workers)
}

// csvCPU is a CSV cell of the client's (or the server's) CPU an operation,
// empty where not measured.
func csvCPU(c *PhaseCPU, server bool) string {
	switch {
	case c == nil, server && c.Server == nil:
		return ""
	case server:
		return strconv.FormatFloat(*c.Server, 'g', 6, 64)
	}
	return strconv.FormatFloat(c.Client, 'g', 6, 64)
}
