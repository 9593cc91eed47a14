package sched_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// batchOf queues 1 MiB requests at offs on cartridge V of a scheduler
// with geometry geo and returns it with the one batch it hands a drive.
func batchOf(t *testing.T, geo *sched.Geometry, offs []int64) (*sched.Scheduler, []sched.Request) {
	t.Helper()
	s := sched.New(sched.Rules{MinFiles: 1})
	s.Tape = geo
	for i, o := range offs {
		s.Add(req(int64(i), "V", o, 1<<20, 0))
	}
	ds := s.Next(t0, []sched.Drive{{ID: "d0"}}, 1<<40)
	if len(ds) != 1 {
		t.Fatalf("%d decisions", len(ds))
	}
	return s, ds[0].Requests
}

func req(id int64, vol string, off, size int64, age time.Duration) sched.Request {
	return sched.Request{ID: id, Key: fmt.Sprint(id), Volume: vol, Offset: off, Size: size, Queued: t0.Add(-age)}
}

func TestMountRules(t *testing.T) {
	rules := sched.Rules{MinBytes: 1000, MinFiles: 3, MaxAge: time.Minute}
	drives := []sched.Drive{{ID: "d0"}}
	cases := []struct {
		name  string
		reqs  []sched.Request
		mount bool
	}{
		{"too little queued", []sched.Request{req(1, "V", 0, 10, 0)}, false},
		{"enough bytes", []sched.Request{req(1, "V", 0, 600, 0), req(2, "V", 700, 600, 0)}, true},
		{"enough files", []sched.Request{req(1, "V", 0, 1, 0), req(2, "V", 5, 1, 0), req(3, "V", 9, 1, 0)}, true},
		{"old enough", []sched.Request{req(1, "V", 0, 1, 2*time.Minute)}, true},
		{"priority", []sched.Request{{ID: 1, Volume: "V", Size: 1, Priority: 1, Queued: t0}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sched.New(rules)
			for _, r := range tc.reqs {
				s.Add(r)
			}
			got := s.Next(t0, drives, 1<<40)
			if (len(got) == 1) != tc.mount {
				t.Fatalf("decisions %+v, want mount=%v", got, tc.mount)
			}
			if tc.mount && (!got[0].Mount || len(got[0].Requests) != len(tc.reqs)) {
				t.Fatalf("decision %+v", got[0])
			}
		})
	}
}

func TestMountedCartridgeNeedsNoThreshold(t *testing.T) {
	s := sched.New(sched.Rules{MinBytes: 1 << 40, MaxAge: time.Hour})
	s.Add(req(1, "V", 0, 1, 0))
	got := s.Next(t0, []sched.Drive{{ID: "d0", Volume: "V"}}, 1<<40)
	if len(got) != 1 || got[0].Mount || got[0].Drive != "d0" {
		t.Fatalf("%+v", got)
	}
}

func TestCoalescingOrderBufferAndQuota(t *testing.T) {
	s := sched.New(sched.Rules{MinFiles: 1, Drives: 1})
	s.Add(req(1, "A", 300, 10, 0))
	s.Add(req(2, "A", 100, 10, 0))
	if _, dup := s.Add(sched.Request{ID: 3, Key: "1", Volume: "A", Offset: 300, Size: 10, Queued: t0}); !dup {
		t.Fatal("a second request for the same file was not coalesced")
	}
	s.Add(req(4, "A", 200, 10, 0))
	s.Add(req(5, "B", 0, 10, time.Second)) // older: B goes first
	got := s.Next(t0, []sched.Drive{{ID: "d0"}, {ID: "d1"}}, 15)
	if len(got) != 1 {
		t.Fatalf("drive quota of 1: %d decisions", len(got))
	}
	if got[0].Volume != "B" {
		t.Fatalf("oldest request's cartridge not first: %+v", got[0])
	}
	s.Done("B", nil)
	got = s.Next(t0, []sched.Drive{{ID: "d0", Volume: "B"}, {ID: "d1"}}, 25)
	if len(got) != 1 || got[0].Volume != "A" {
		t.Fatalf("%+v", got)
	}
	var offs []int64
	for _, r := range got[0].Requests {
		offs = append(offs, r.Offset)
	}
	if !reflect.DeepEqual(offs, []int64{100, 200}) { // position order, up to the buffer
		t.Fatalf("batch offsets %v", offs)
	}
	if s.Len() != 1 {
		t.Fatalf("%d left queued", s.Len())
	}
}

func TestDeterministic(t *testing.T) {
	run := func() []sched.Decision {
		s := sched.New(sched.Rules{MinFiles: 5, MaxAge: time.Minute})
		r := rand.New(rand.NewPCG(7, 7))
		for i := 0; i < 2000; i++ {
			s.Add(req(int64(i), fmt.Sprintf("V%02d", r.IntN(30)), r.Int64N(1<<40), r.Int64N(1<<30), time.Duration(r.IntN(120))*time.Second))
		}
		return s.Next(t0, []sched.Drive{{ID: "a"}, {ID: "b", Volume: "V03"}, {ID: "c"}, {ID: "d", Volume: "V29"}}, 1<<40)
	}
	if a, b := run(), run(); !reflect.DeepEqual(a, b) {
		t.Fatal("the same queue gave different decisions")
	}
}

// The acceptance test of the issue, on the emulated library with real bytes
// and an instant clock: 1,000 files on 10 cartridges, all requested at
// once in random order. The scheduler mounts each cartridge once, reads in
// position order, and positions for less than half the time that serving
// the same requests first come, first served does.
func TestThousandRecallsOnTenCartridges(t *testing.T) {
	const vols, perVol, drives = 10, 100, 4
	dir := t.TempDir()
	// Small cartridges: the library spreads them over the whole modelled
	// tape, so locates cost what they would on full LTO-9 cartridges.
	lib, err := tape.OpenEmulator(dir, tape.Options{Drives: drives, Cartridges: vols, Capacity: 1 << 20, Clock: clock.NewInstant(time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type file struct {
		vol  string
		seq  int
		off  int64
		data []byte
	}
	r := rand.New(rand.NewPCG(1, 1))
	var files []file
	for v := 0; v < vols; v++ {
		vol := fmt.Sprintf("T%05d", v)
		if err := lib.Mount(ctx, "drive0", vol); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perVol; i++ {
			data := bytes.Repeat([]byte{byte(v), byte(i)}, 512+r.IntN(2048))
			w, err := lib.Append(ctx, "drive0", &tape.Header{Entries: []tape.Entry{{Path: fmt.Sprintf("/%s/%d", vol, i), Size: int64(len(data))}}})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(data)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files = append(files, file{vol, w.Seq(), w.Start(), data})
		}
		if err := lib.Dismount(ctx, "drive0"); err != nil {
			t.Fatal(err)
		}
	}
	order := r.Perm(len(files))

	// Scheduled.
	s := sched.New(sched.Rules{MinFiles: 1})
	for _, i := range order {
		f := files[i]
		s.Add(sched.Request{ID: int64(i), Key: fmt.Sprint(i), Volume: f.vol, Seq: f.seq, Offset: f.off, Size: int64(len(f.data)), Queued: t0})
	}
	before := lib.Stats()
	state := make([]sched.Drive, drives)
	for i := range state {
		state[i].ID = fmt.Sprintf("drive%d", i)
	}
	mounts := map[string]int{}
	for s.Len() > 0 {
		ds := s.Next(t0, state, 1<<40)
		if len(ds) == 0 {
			t.Fatal("requests queued but no decision")
		}
		for _, d := range ds {
			if d.Unmount != "" {
				if err := lib.Dismount(ctx, d.Drive); err != nil {
					t.Fatal(err)
				}
			}
			if d.Mount {
				if err := lib.Mount(ctx, d.Drive, d.Volume); err != nil {
					t.Fatal(err)
				}
				mounts[d.Volume]++
			}
			last := int64(-1)
			for _, q := range d.Requests {
				if q.Offset < last {
					t.Fatalf("%s: read at %d after %d", d.Volume, q.Offset, last)
				}
				last = q.Offset
				if q.ReadThrough {
					if err := lib.ReadThrough(ctx, d.Drive, q.Seq, 0); err != nil {
						t.Fatal(err)
					}
				}
				readCheck(t, lib, d.Drive, q.Seq, files[q.ID].data)
			}
			for i := range state {
				if state[i].ID == d.Drive {
					state[i].Volume = d.Volume
				}
			}
			s.Done(d.Volume, nil)
		}
	}
	sched := stats(lib.Stats(), before)
	if sched.Mounts > vols {
		t.Fatalf("%d mounts for %d cartridges", sched.Mounts, vols)
	}
	for v, n := range mounts {
		if n != 1 {
			t.Fatalf("%s mounted %d times", v, n)
		}
	}
	for i := range state { // leave the library as FCFS finds it
		if state[i].Volume != "" {
			lib.Dismount(ctx, state[i].ID)
		}
	}

	// First come, first served: each request in arrival order, on the
	// drive holding its cartridge or else the drive used longest ago.
	before = lib.Stats()
	held := make([]string, drives)
	lastUse := make([]int, drives)
	for n, i := range order {
		f := files[i]
		d := -1
		for k := range held {
			if held[k] == f.vol {
				d = k
			}
		}
		if d < 0 {
			d = 0
			for k := range held {
				if lastUse[k] < lastUse[d] {
					d = k
				}
			}
			id := fmt.Sprintf("drive%d", d)
			if held[d] != "" {
				lib.Dismount(ctx, id)
			}
			if err := lib.Mount(ctx, id, f.vol); err != nil {
				t.Fatal(err)
			}
			held[d] = f.vol
		}
		lastUse[d] = n + 1
		readCheck(t, lib, fmt.Sprintf("drive%d", d), f.seq, f.data)
	}
	fcfs := stats(lib.Stats(), before)
	t.Logf("scheduled: %d mounts, positioning %v; FCFS: %d mounts, positioning %v", sched.Mounts, sched.Positioning, fcfs.Mounts, fcfs.Positioning)
	if 2*sched.Positioning > fcfs.Positioning {
		t.Fatalf("scheduled positioning %v is not 2× below FCFS's %v", sched.Positioning, fcfs.Positioning)
	}
}

func readCheck(t *testing.T, lib tape.Library, drive string, seq int, want []byte) {
	t.Helper()
	rd, err := lib.ReadData(context.Background(), drive, seq, 0, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rd)
	rd.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s tape file %d: %d bytes back, %v", drive, seq, len(got), err)
	}
}

func stats(after, before tape.Stats) tape.Stats {
	return tape.Stats{Mounts: after.Mounts - before.Mounts, Positioning: after.Positioning - before.Positioning}
}

// BenchmarkQueue100k: a queue of 100,000 recalls over 200 cartridges; each
// iteration adds them all and hands out the first decisions for 8 drives,
// then serves everything to the end. Reported: ns per decision round.
func BenchmarkQueue100k(b *testing.B) {
	const n, vols = 100000, 200
	r := rand.New(rand.NewPCG(3, 3))
	reqs := make([]sched.Request, n)
	for i := range reqs {
		reqs[i] = req(int64(i), fmt.Sprintf("V%03d", r.IntN(vols)), r.Int64N(18e12), 1+r.Int64N(4<<30), time.Duration(r.IntN(3600))*time.Second)
	}
	drives := make([]sched.Drive, 8)
	for i := range drives {
		drives[i].ID = fmt.Sprintf("d%d", i)
	}
	b.ResetTimer()
	var rounds, worst int64
	for i := 0; i < b.N; i++ {
		s := sched.New(sched.Rules{MinFiles: 100, MaxAge: time.Minute})
		s.Tape = &sched.Geometry{Gen: tape.Generations["LTO-9"]} // as core runs it
		for _, q := range reqs {
			s.Add(q)
		}
		for s.Len() > 0 {
			t := time.Now()
			ds := s.Next(t0, drives, 1<<50)
			if d := time.Since(t).Nanoseconds(); d > worst {
				worst = d
			}
			rounds++
			for _, d := range ds {
				s.Done(d.Volume, nil)
			}
		}
	}
	b.ReportMetric(float64(worst)/1e6, "worst-ms/decision")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds)/1e6, "ms/round")
}

func TestAggregate(t *testing.T) {
	for _, c := range []struct {
		sizes  []int64
		target int64
		want   []int
	}{
		{nil, 10, nil},
		{[]int64{3, 3, 3, 3}, 10, []int{0, 3}},
		{[]int64{20, 1, 1}, 10, []int{0, 1}},    // a large file is a tape file of its own
		{[]int64{1, 20, 1}, 10, []int{0, 1, 2}}, // and closes the one before
		{[]int64{5, 5, 5}, 10, []int{0, 2}},     // exactly the target fits
		{[]int64{0, 0, 0}, 0, []int{0}},         // empty files fit any target
	} {
		if got := sched.Aggregate(c.sizes, c.target); !slices.Equal(got, c.want) {
			t.Errorf("sched.Aggregate(%v, %d) = %v, want %v", c.sizes, c.target, got, c.want)
		}
	}
	// The first tape file holds one catalog page, the others up to
	// MaxAggregateFiles.
	first, most := sched.FirstAggregateFiles, sched.MaxAggregateFiles
	many := make([]int64, first+2*most+1)
	if got := sched.Aggregate(many, 1<<30); !slices.Equal(got, []int{0, first, first + most, first + 2*most}) {
		t.Errorf("%d empty files: groups start at %v", len(many), got)
	}
}

// With the tape's geometry a batch is read in one sweep: forward wraps by
// rising longitudinal position, then reverse wraps by falling position.
// On LTO-9, 9e12 starts forward wrap 140, 3e12 is 690 m along forward wrap
// 46; 2e12, 1e12 and 5e12 are 920, 460 and 230 m along reverse wraps 31,
// 15 and 77. Without it, byte order.
func TestBatchSweepOrder(t *testing.T) {
	offs := []int64{1e12, 2e12, 3e12, 5e12, 9e12}
	for _, c := range []struct {
		geo  *sched.Geometry
		want []int64
	}{
		{nil, []int64{1e12, 2e12, 3e12, 5e12, 9e12}},
		{&sched.Geometry{Gen: tape.Generations["LTO-9"]}, []int64{9e12, 3e12, 2e12, 1e12, 5e12}},
		// a small cartridge spread over the whole tape orders the same
		{&sched.Geometry{Gen: tape.Generations["LTO-9"], Capacity: 18e9}, []int64{9e12, 3e12, 2e12, 1e12, 5e12}},
	} {
		s := sched.New(sched.Rules{MinFiles: 1})
		s.Tape = c.geo
		scale := int64(1)
		if c.geo != nil && c.geo.Capacity > 0 {
			scale = c.geo.Gen.Capacity / c.geo.Capacity
		}
		for i, o := range offs {
			s.Add(req(int64(i), "V", o/scale, 1, 0))
		}
		ds := s.Next(t0, []sched.Drive{{ID: "d0"}}, 1<<40)
		if len(ds) != 1 {
			t.Fatalf("%d decisions", len(ds))
		}
		var got []int64
		for _, r := range ds[0].Requests {
			got = append(got, r.Offset*scale)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("geometry %v: read order %v, want %v", c.geo != nil, got, c.want)
		}
	}
}

// A batch of every file on a cartridge (a repack's or a recopy's) is read
// in byte order, streaming the serpentine tape wrap by wrap with no locate
// after the first; the sweep order would locate between every two files
// (about 16,000 locates for an LTO-9 cartridge of 1 GB files; the
// simulator's recopy took twice as long).
func TestDenseBatchReadsInByteOrder(t *testing.T) {
	g := tape.Generations["LTO-9"]
	s := sched.New(sched.Rules{MinFiles: 1})
	s.Tape = &sched.Geometry{Gen: g}
	const size = 1 << 30
	n := int64(float64(g.Capacity) * 0.9 / size)
	for i := n - 1; i >= 0; i-- { // queued in any order
		s.Add(req(i, "V", i*size, size, 0))
	}
	ds := s.Next(t0, []sched.Drive{{ID: "d0"}}, 1<<62)
	if len(ds) != 1 || int64(len(ds[0].Requests)) != n {
		t.Fatalf("decisions %+v", len(ds))
	}
	for i, q := range ds[0].Requests {
		if q.Offset != int64(i)*size || i > 0 && !q.ReadThrough {
			t.Fatalf("request %d: offset %d, read through %v; want byte order, read on", i, q.Offset, q.ReadThrough)
		}
	}
}

// A drive that has just served its cartridge keeps it for Linger: a
// request for another cartridge waits (or takes an empty drive), one for
// its own is served at once without a mount; after Linger the drive is
// anyone's.
func TestLinger(t *testing.T) {
	s := sched.New(sched.Rules{MinFiles: 1, Linger: 10 * time.Second})
	s.Add(req(1, "B", 0, 1, 0))
	kept := sched.Drive{ID: "d0", Volume: "A", Idle: t0.Add(-time.Second)}
	if got := s.Next(t0, []sched.Drive{kept}, 1<<40); len(got) != 0 {
		t.Fatalf("a lingering drive was given another cartridge: %+v", got)
	}
	if got := s.Next(t0, []sched.Drive{kept, {ID: "d1"}}, 1<<40); len(got) != 1 || got[0].Drive != "d1" || !got[0].Mount {
		t.Fatalf("an empty drive should take B: %+v", got)
	}
	s.Add(req(2, "A", 0, 1, 0))
	s.Add(req(3, "C", 0, 1, 0))
	got := s.Next(t0, []sched.Drive{kept}, 1<<40)
	if len(got) != 1 || got[0].Volume != "A" || got[0].Mount {
		t.Fatalf("a request for the kept cartridge: %+v", got)
	}
	s.Done("A", nil)
	if got := s.Next(t0.Add(10*time.Second), []sched.Drive{kept}, 1<<40); len(got) != 1 || got[0].Volume != "C" || got[0].Unmount != "A" {
		t.Fatalf("after Linger the drive should take C: %+v", got)
	}
}

// A cartridge held (the robot failed to mount it) is not mounted before
// its hold passes, while other cartridges are; a drive that already holds
// it serves it.
func TestHold(t *testing.T) {
	s := sched.New(sched.Rules{MinFiles: 1})
	s.Add(req(1, "A", 0, 1, time.Minute)) // the older: first, but held
	s.Add(req(2, "B", 0, 1, 0))
	s.Hold("A", t0.Add(10*time.Second))
	empty := []sched.Drive{{ID: "d0"}, {ID: "d1"}}
	got := s.Next(t0, empty, 1<<40)
	if len(got) != 1 || got[0].Volume != "B" {
		t.Fatalf("with A held: %+v, want B alone", got)
	}
	s.Done("B", nil)
	if got := s.Next(t0.Add(9*time.Second), empty, 1<<40); len(got) != 0 {
		t.Fatalf("A mounted while held: %+v", got)
	}
	if got := s.Next(t0.Add(9*time.Second), []sched.Drive{{ID: "d0", Volume: "A"}}, 1<<40); len(got) != 1 || got[0].Mount {
		t.Fatalf("a drive holding A: %+v, want it served without a mount", got)
	}
	s.Add(req(3, "A", 0, 1, time.Minute))
	s.Done("A", nil)
	if got := s.Next(t0.Add(10*time.Second), empty, 1<<40); len(got) != 1 || got[0].Volume != "A" || !got[0].Mount {
		t.Fatalf("once the hold has passed: %+v, want A mounted", got)
	}
}

// Within a batch the scheduler reads on through a gap that streams in less
// time than a locate (on LTO-5 a locate costs 3 s plus the distance at a
// speed not much above reading's: up to about 2.5 GB) and locates over
// anything longer, backwards, or on a scaled cartridge where a few bytes
// stand for a long stretch of tape.
func TestReadThroughGaps(t *testing.T) {
	lto5 := tape.Generations["LTO-5"]
	const mib = 1 << 20
	cases := []struct {
		name string
		geo  *sched.Geometry
		offs []int64 // 1 MiB requests at these offsets
		want []bool
	}{
		{"3 MiB gaps", &sched.Geometry{Gen: lto5}, []int64{0, 4 * mib, 8 * mib, 12 * mib}, []bool{false, true, true, true}},
		{"adjacent", &sched.Geometry{Gen: lto5}, []int64{10 * mib, 11 * mib}, []bool{false, true}},
		{"ten gigabytes apart", &sched.Geometry{Gen: lto5}, []int64{0, 10 << 30, 10<<30 + 2*mib}, []bool{false, false, true}},
		{"no geometry", nil, []int64{0, 4 * mib}, []bool{false, false}},
		{"scaled cartridge", &sched.Geometry{Gen: lto5, Capacity: 64 * mib}, []int64{0, 4 * mib}, []bool{false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, batch := batchOf(t, tc.geo, tc.offs)
			if len(batch) != len(tc.offs) {
				t.Fatalf("batch %+v", batch)
			}
			var got []bool
			for _, q := range batch {
				got = append(got, q.ReadThrough)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("read through %v, want %v", got, tc.want)
			}
		})
	}
	// Across wraps the sweep goes back along the tape: the next request
	// in sweep order is behind the head in byte order, so it is located.
	s := sched.New(sched.Rules{MinFiles: 1})
	s.Tape = &sched.Geometry{Gen: lto5}
	bpw := int64(lto5.BytesPerWrap())
	s.Add(req(1, "V", bpw-2*mib, mib, 0))   // end of wrap 0, far from BOT
	s.Add(req(2, "V", bpw+bpw/2, mib, 0))   // middle of wrap 1, on the way back
	s.Add(req(3, "V", 2*bpw+bpw/4, mib, 0)) // wrap 2, a quarter out
	ds := s.Next(t0, []sched.Drive{{ID: "d0"}}, 1<<40)
	for _, q := range ds[0].Requests {
		if q.ReadThrough {
			t.Fatalf("request %d at %d read through across wraps: %+v", q.ID, q.Offset, ds[0].Requests)
		}
	}
}

// A cartridge the robot fails to mount waits the base pause, then twice
// as long each round, never more than MaxMountHold, and is given up on
// at the MaxMountFailures-th failed round.
func TestRetryMount(t *testing.T) {
	for _, tc := range []struct {
		base   time.Duration
		n      int
		hold   time.Duration
		giveUp bool
	}{
		{10 * time.Second, 1, 10 * time.Second, false},
		{10 * time.Second, 2, 20 * time.Second, false},
		{10 * time.Second, 4, 80 * time.Second, false},
		{10 * time.Second, sched.MaxMountFailures, 0, true},
		{2 * time.Minute, 3, sched.MaxMountHold, false},
		{time.Second, 0, time.Second, false},
	} {
		hold, giveUp := sched.RetryMount(tc.base, tc.n)
		if hold != tc.hold || giveUp != tc.giveUp {
			t.Errorf("RetryMount(%v, %d) = %v, %v; want %v, %v", tc.base, tc.n, hold, giveUp, tc.hold, tc.giveUp)
		}
	}
}

// Requests arriving for a cartridge while its batch is read join the
// batch when the drive reads on to them from the request before them —
// further along in the batch's order, no locate added — in their places,
// as far as the buffer holds them; those behind the drive or a locate
// away wait for the next batch, and a cartridge not being read takes
// none.
func TestMergeIntoRunningBatch(t *testing.T) {
	const mib = 1 << 20
	lto5 := &sched.Geometry{Gen: tape.Generations["LTO-5"]}
	lto9 := &sched.Geometry{Gen: tape.Generations["LTO-9"]}
	offsets := func(rs []sched.Request) []int64 {
		var o []int64
		for _, r := range rs {
			o = append(o, r.Offset)
		}
		return o
	}
	for _, tc := range []struct {
		name   string
		geo    *sched.Geometry
		batch  []int64 // queued first: the batch, read in the scheduler's order
		cur    int     // the request of the batch being read
		arrive []int64
		buffer int64
		want   []int64 // the batch after cur
		queued int     // left for the next batch
	}{
		{"on the way", lto5, []int64{10 * mib, 20 * mib, 30 * mib, 40 * mib}, 1, []int64{15 * mib, 25 * mib, 50 * mib, 20 << 30}, 1 << 40,
			[]int64{25 * mib, 30 * mib, 40 * mib, 50 * mib}, 2},
		{"a full buffer", lto5, []int64{10 * mib, 20 * mib, 30 * mib, 40 * mib}, 1, []int64{25 * mib, 50 * mib}, mib,
			[]int64{25 * mib, 30 * mib, 40 * mib}, 1},
		// LTO-9 sweeps 9, 3, 1, 5 TB (TestBatchSweepOrder): just past
		// 3 TB reads on, 2 TB is a locate away, just past 9 TB is behind
		{"the sweep", lto9, []int64{1e12, 3e12, 5e12, 9e12}, 1, []int64{3e12 + 2*mib, 2e12, 9e12 + 2*mib, 5e12 + 2*mib}, 1 << 40,
			[]int64{3e12 + 2*mib, 1e12, 5e12, 5e12 + 2*mib}, 2},
		{"no geometry: every request located to", nil, []int64{10 * mib, 20 * mib}, 0, []int64{15 * mib}, 1 << 40,
			[]int64{20 * mib}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, b := batchOf(t, tc.geo, tc.batch)
			for i, o := range tc.arrive {
				s.Add(req(int64(100+i), "V", o, mib, 0))
			}
			rest, added := s.Merge("V", b[tc.cur], b[tc.cur+1:], tc.buffer)
			if got := offsets(rest); !slices.Equal(got, tc.want) {
				t.Errorf("the batch after %d goes on %v, want %v", b[tc.cur].Offset, got, tc.want)
			}
			if len(added) != len(rest)-len(b[tc.cur+1:]) || s.Len() != tc.queued {
				t.Errorf("%d added, %d left queued; want %d left", len(added), s.Len(), tc.queued)
			}
			for i, r := range rest {
				prev := b[tc.cur]
				if i > 0 {
					prev = rest[i-1]
				}
				if tc.geo == nil {
					break
				}
				if reach, _ := tc.geo.Gen.Reach(prev.Offset+prev.Size, r.Offset, 0); r.ReadThrough != reach {
					t.Errorf("request at %d: read through %v, want %v", r.Offset, r.ReadThrough, reach)
				}
			}
			// the next batch is what stayed
			s.Done("V", nil)
			if next := s.Next(t0, []sched.Drive{{ID: "d0", Volume: "V"}}, 1<<40); len(next) != 1 || len(next[0].Requests) != tc.queued {
				t.Errorf("next batch %+v, want %d requests", next, tc.queued)
			}
		})
	}
	// a cartridge not being read takes none
	s := sched.New(sched.Rules{MinFiles: 1})
	s.Tape = lto5
	s.Add(req(1, "V", 5*mib, mib, 0))
	if rest, added := s.Merge("V", req(0, "V", 0, mib, 0), nil, 1<<40); len(rest)+len(added) != 0 || s.Len() != 1 {
		t.Errorf("merged into no batch: %v, %v", rest, added)
	}
}

// AgeDue is when the next cartridge not being read comes of age: the
// oldest request of those not served, plus MaxAge, if after now.
func TestAgeDue(t *testing.T) {
	s := sched.New(sched.Rules{MinFiles: 100, MaxAge: 5 * time.Minute})
	if _, ok := s.AgeDue(t0); ok {
		t.Fatal("an empty queue comes of age")
	}
	s.Add(req(1, "A", 0, 1, 1*time.Minute)) // due in 4 min
	s.Add(req(2, "B", 0, 1, 3*time.Minute)) // due in 2 min
	s.Add(req(3, "C", 0, 1, 9*time.Minute)) // past due: Next takes it
	if at, ok := s.AgeDue(t0); !ok || !at.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("due at %v, %v; want in 2 min", at.Sub(t0), ok)
	}
	// B and C, past due, are read; a request arriving for B while it is
	// read is served after it without a threshold: A is next due
	s.Next(t0.Add(3*time.Minute), []sched.Drive{{ID: "d0"}, {ID: "d1"}}, 1<<40)
	s.Add(req(4, "B", 0, 1, 90*time.Second)) // would be due in 3.5 min
	if at, ok := s.AgeDue(t0.Add(3 * time.Minute)); !ok || !at.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("due at %v, %v; want in 4 min", at.Sub(t0), ok)
	}
}
