package main

import (
	"context"
	"fmt"
	"io"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/tape"
)

// gaps recalls every fourth of n files of size bytes from one full-size
// cartridge, once with recall_gaps = "locate" (a locate before every file)
// and once with the default "read" (reading on through short gaps), and
// prints what the drive did in library time. The library runs in instant
// time: its counters are the model's, so the two runs differ only in how
// the drive got from one file to the next.
func gaps(g tape.Generation, n int, size int64) {
	type outcome struct {
		st   tape.Stats
		want int
	}
	run := func(mode string) outcome {
		ctx := context.Background()
		s, c, stop := start(func(cfg *config.Config) {
			cfg.Library = config.Library{Generation: g.Name, Drives: 1, Cartridges: 2, TimeScale: "instant", Path: *tapeDir}
			cfg.HSM.MigrateDrives = 1
			cfg.HSM.RecallGaps = mode
			cfg.HSM.RecallMinFiles = (n + 3) / 4 // the mount waits for the whole request: one batch
		})
		defer stop()
		paths := onTapeOnly(ctx, c, "g", n, size)
		var wanted []string
		for i := 0; i < n; i += 4 {
			wanted = append(wanted, paths[i])
		}
		for _, d := range s.Library.Drives() {
			if d.Volume != "" {
				if err := s.Library.Dismount(ctx, d.ID); err != nil {
					fail(err)
				}
			}
		}
		before := s.Library.Stats()
		if _, err := c.Stage(ctx, wanted, 0); err != nil {
			fail(err)
		}
		for _, p := range wanted {
			if _, err := c.Get(ctx, p, io.Discard, client.GetOptions{}); err != nil {
				fail(err)
			}
		}
		st := s.Library.Stats()
		return outcome{tape.Stats{Mounts: st.Mounts - before.Mounts, Locates: st.Locates - before.Locates, ReadThroughs: st.ReadThroughs - before.ReadThroughs,
			Positioning: st.Positioning - before.Positioning, Mounting: st.Mounting - before.Mounting, Transfer: st.Transfer - before.Transfer}, len(wanted)}
	}
	loc, rd := run("locate"), run("read")
	for _, r := range []struct {
		mode string
		st   tape.Stats
	}{{"locate", loc.st}, {"read", rd.st}} {
		keep(map[string]any{"part": "gaps", "gen": g.Name, "files": n, "recalled": loc.want, "size": size, "recall_gaps": r.mode,
			"mounts": r.st.Mounts, "locates": r.st.Locates, "read_throughs": r.st.ReadThroughs, "positioning_s": r.st.Positioning.Seconds(), "streaming_s": r.st.Transfer.Seconds()})
	}
	fmt.Printf("\n### Recall of every fourth file: %d of %d files of %d KiB on one %s cartridge (library time)\n\n", loc.want, n, size>>10, g.Name)
	fmt.Println("| recall_gaps | mounts | locates | gaps read through | positioning s | streaming s | drive busy s |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range []struct {
		name string
		o    outcome
	}{{`"locate" (a locate before every file)`, loc}, {`"read" (the default)`, rd}} {
		st := r.o.st
		fmt.Printf("| %s | %d | %d | %d | %.1f | %.1f | %.1f |\n", r.name, st.Mounts, st.Locates, st.ReadThroughs, st.Positioning.Seconds(), st.Transfer.Seconds(),
			(st.Mounting + st.Positioning + st.Transfer).Seconds())
	}
	busy := func(st tape.Stats) float64 { return (st.Mounting + st.Positioning + st.Transfer).Seconds() }
	fmt.Printf("\nPositioning %.1f× less; the drive busy %.1f× less.\n", loc.st.Positioning.Seconds()/rd.st.Positioning.Seconds(), busy(loc.st)/busy(rd.st))
}
