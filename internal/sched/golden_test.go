package sched_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/testutil/golden"
)

// The scheduler's decisions for recorded queues do not drift unnoticed:
// each queue (seeded, so the same every run) is served to the end by
// drives that finish each batch at once, and every decision — which
// cartridge in which drive, which requests in what order, which gaps are
// read through — is compared with testdata. A change to the rules or the
// ordering shows up as a diff to review and commit with -update.
func TestDecisionsGolden(t *testing.T) {
	for _, c := range []struct {
		name  string
		rules sched.Rules
		tape  bool
	}{
		{"byte-order", sched.Rules{MinFiles: 8, MaxAge: time.Minute}, false},
		{"lto9-sweep", sched.Rules{MinFiles: 8, MaxAge: time.Minute}, true},
		{"lto9-locate-every-file", sched.Rules{MinFiles: 8, MaxAge: time.Minute, LocateEveryFile: true}, true},
		{"lto9-quota-and-priority", sched.Rules{MinFiles: 20, MaxAge: 10 * time.Minute, Drives: 2}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := sched.New(c.rules)
			if c.tape {
				s.Tape = &sched.Geometry{Gen: tape.Generations["LTO-9"], Capacity: 1 << 40}
			}
			r := rand.New(rand.NewPCG(11, 13))
			for i := range 300 {
				// V00–V02 hold their files close together (small gaps,
				// read through), V03–V05 spread over the whole tape.
				v := r.IntN(6)
				span := int64(1 << 40)
				if v < 3 {
					span = 4 << 30
				}
				q := req(int64(i), fmt.Sprintf("V%02d", v), r.Int64N(span), 1<<20+r.Int64N(64<<20), time.Duration(r.IntN(180))*time.Second)
				if i%50 == 0 {
					q.Priority = 1
				}
				q.Seq = 1 + int(q.Offset>>30)
				s.Add(q)
			}
			drives := []sched.Drive{{ID: "a"}, {ID: "b", Volume: "V03"}, {ID: "c"}}
			var out strings.Builder
			now := t0
			for round := 1; s.Len() > 0 && round < 100; round++ {
				ds := s.Next(now, drives, 1<<40)
				fmt.Fprintf(&out, "round %d at +%s: %d queued, %d decisions\n", round, now.Sub(t0), s.Len(), len(ds))
				for _, d := range ds {
					fmt.Fprintf(&out, "  %s: %s", d.Drive, d.Volume)
					if d.Mount {
						fmt.Fprint(&out, " mount")
					}
					if d.Unmount != "" {
						fmt.Fprintf(&out, " (unmount %s)", d.Unmount)
					}
					fmt.Fprint(&out, ":")
					for _, q := range d.Requests {
						mark := ""
						if q.ReadThrough {
							mark = "~"
						}
						fmt.Fprintf(&out, " %s%d", mark, q.ID)
					}
					fmt.Fprintln(&out)
					for i := range drives {
						if drives[i].ID == d.Drive {
							drives[i].Volume = d.Volume
						}
					}
					s.Done(d.Volume, nil)
				}
				now = now.Add(time.Minute)
			}
			golden.Check(t, c.name+".golden", out.String())
		})
	}
}
