package main

import (
	"fmt"
	"slices"

	"github.com/strata-storage/strata/internal/tape"
)

// tapeSmall compares the migration rate of small files (aggregated into
// large tape files) with that of large files of the same total, one drive
// with its cartridge mounted, in pairs run back to back so that the
// machine's drift falls on both sides of each ratio. The per-file cost is
// what the small files' extra wall time comes to per file.
func tapeSmall(g tape.Generation) {
	// Pairs of each order; the 1 MiB files' ratio varies by a hundredth
	// between pairs, so two do (a rig costs a mount: 5 s at x4).
	sizes := []struct {
		name  string
		files int
		size  int64
		reps  int
	}{{"1,000 × 1 MiB", 1000, 1 << 20, 2}, {"16,384 × 64 KiB", 16384, 64 << 10, 4}}
	fmt.Printf("\n### Small files to tape against 2 × 512 MiB, one %s drive, time scale %s (paired, the order alternating, median of the pairs)\n\n", g.Name, *scale)
	fmt.Println("| files | large MB/s | small MB/s | ratio (median) | ratios | work per file outside the drive, ms |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, sz := range sizes {
		var ratios, lr, sr, perFile []float64
		for r := 0; r < sz.reps; r++ {
			// Each run has a rig of its own and is the first migration
			// onto its mounted cartridge: the host backs a guest page on
			// first touch and takes freed ones back within seconds, so a
			// run that followed another on one rig wrote its tape into
			// pages the host had to back anew (0.3–0.4 GB/s here, see
			// touch) and lost 2–3× to whichever run went first. The
			// order within a pair alternates all the same.
			first, second := func() migration { return migrateOnce(g, 1, 2, 512<<20) }, func() migration { return migrateOnce(g, 1, sz.files, sz.size) }
			if r%2 == 1 {
				first, second = second, first
			}
			a, b := first(), second()
			l, sm := a, b
			if r%2 == 1 {
				l, sm = b, a
			}
			// Both move the same bytes at the same drive rate; the small
			// files' extra wall time is their per-file work.
			extra := sm.wall - l.wall*float64(sm.bytes)/float64(l.bytes)
			ratios = append(ratios, sm.rate()/l.rate())
			lr, sr = append(lr, l.rate()/1e6), append(sr, sm.rate()/1e6)
			perFile = append(perFile, 1e3*extra/float64(sz.files))
			keep(map[string]any{"part": "tapesmall", "gen": g.Name, "scale": *scale, "files": sz.files, "size": sz.size,
				"large_mbps": l.rate() / 1e6, "small_mbps": sm.rate() / 1e6, "ratio": sm.rate() / l.rate(), "ms_per_file": 1e3 * extra / float64(sz.files)})
		}
		fmt.Printf("| %s | %.0f | %.0f | %.2f | %s | %.2f |\n", sz.name, median(lr), median(sr), median(ratios), list(ratios), median(perFile))
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func list(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.2f", x)
	}
	return out
}
