package tape

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Generation holds the physical parameters of one tape drive generation
// (LTO-1 … LTO-10, IBM TS1160, Oracle T10000D), from the LTO Program's
// generation specifications and the vendors' drive data sheets (IBM's
// figures where they differ from the specification).
type Generation struct {
	Name     string
	Capacity int64   // native bytes per cartridge
	Rate     float64 // native bytes/s, streaming
	Length   float64 // tape length, metres
	Wraps    int     // end-to-end passes of the serpentine layout
	Load     time.Duration
	Unload   time.Duration // after rewinding
	// AvgLocate is the vendor's average locate from BOT; the locate speed
	// is derived from it (see LocateSpeed).
	AvgLocate time.Duration
	// LocateStart is the fixed part of every locate (accelerating,
	// reading the servo band, settling).
	LocateStart time.Duration
	// WrapChange is added when a locate changes wrap (head step and
	// direction change).
	WrapChange time.Duration
	// Backhitch is the stop and reposition a synchronising file mark
	// forces on a streaming drive: it writes out its buffer, stops past
	// the mark, and must back up to resume streaming from it. The sync
	// itself returns when the data is on the medium, which the model has
	// already charged at the native rate as the data was written (the
	// drive's buffer never runs ahead of the tape), so the host waits for
	// the backhitch only when its next write at that point comes sooner
	// than Backhitch after the sync; a locate, rewind or unload instead
	// positions the tape itself. Buffered file marks between tape files
	// cost nothing, as on LTO drives.
	Backhitch time.Duration
	// Exchange is the robot's time to move a cartridge between a slot and
	// a drive (each way).
	Exchange time.Duration
}

// Generations are the presets, by name. LTO-1 … LTO-4: native capacity
// and tape length from the LTO generation specifications (the LTO
// Program's; ECMA-319 for LTO-1); the rate of the drives sites ran (IBM's
// where the specification is higher: LTO-1 20 MB/s specified, 15 MB/s in
// IBM's and HP's drives and as CeMSS measured it; LTO-2 40 specified, 35
// in IBM's drive and Fermilab's Enstore user guidelines, 2008–2009);
// wraps as data tracks ÷ tracks written at once (LTO-1 384 ÷ 8, LTO-2
// 512 ÷ 8, LTO-3 704 ÷ 16, LTO-4 896 ÷ 16, as LTO-5 … LTO-9's are
// 1,280 ÷ 16 … 8,960 ÷ 32); load and unload ~15–20 s in those drives'
// manuals (not checked against a data sheet: 18 s); average locate from
// BOT Fermilab's ~50 s for LTO-4 and ~50–75 s (62 s) for LTO-1 … LTO-3 in
// the same manuals. LTO-5 … LTO-9's load and unload are IBM's
// performance specifications (IBM TS4500 documentation, "Performance
// specifications for LTO tape drives"); LTO-9's unload, 56 s, includes
// the retension its drives do at every unload.
var Generations = map[string]Generation{
	"LTO-1": {Name: "LTO-1", Capacity: 100e9, Rate: 15e6, Length: 609, Wraps: 48, Load: 18 * time.Second, Unload: 18 * time.Second, AvgLocate: 62 * time.Second},
	"LTO-2": {Name: "LTO-2", Capacity: 200e9, Rate: 35e6, Length: 609, Wraps: 64, Load: 18 * time.Second, Unload: 18 * time.Second, AvgLocate: 62 * time.Second},
	"LTO-3": {Name: "LTO-3", Capacity: 400e9, Rate: 80e6, Length: 680, Wraps: 44, Load: 18 * time.Second, Unload: 18 * time.Second, AvgLocate: 62 * time.Second},
	"LTO-4": {Name: "LTO-4", Capacity: 800e9, Rate: 120e6, Length: 820, Wraps: 56, Load: 18 * time.Second, Unload: 18 * time.Second, AvgLocate: 50 * time.Second},
	"LTO-5": {Name: "LTO-5", Capacity: 1500e9, Rate: 140e6, Length: 846, Wraps: 80, Load: 12 * time.Second, Unload: 17 * time.Second, AvgLocate: 60 * time.Second},
	"LTO-6": {Name: "LTO-6", Capacity: 2500e9, Rate: 160e6, Length: 846, Wraps: 136, Load: 12 * time.Second, Unload: 17 * time.Second, AvgLocate: 62 * time.Second},
	"LTO-7": {Name: "LTO-7", Capacity: 6000e9, Rate: 300e6, Length: 960, Wraps: 112, Load: 15 * time.Second, Unload: 20 * time.Second, AvgLocate: 56 * time.Second},
	"LTO-8": {Name: "LTO-8", Capacity: 12000e9, Rate: 360e6, Length: 960, Wraps: 208, Load: 15 * time.Second, Unload: 24 * time.Second, AvgLocate: 59 * time.Second},
	"LTO-9": {Name: "LTO-9", Capacity: 18000e9, Rate: 400e6, Length: 1035, Wraps: 280, Load: 16 * time.Second, Unload: 56 * time.Second, AvgLocate: 65 * time.Second},
	// LTO-10 (LA media): 400 MB/s native, 12 s load-to-ready, 27 s unload,
	// 65 s average space from load point (IBM, "Performance specifications
	// for LTO tape drives", Diamondback Tape Library 2.12.3); 30 TB native
	// (LTO Program, LTO-10 specification). Tape length and wraps are not
	// in those sheets: LTO-9's are assumed.
	"LTO-10": {Name: "LTO-10", Capacity: 30000e9, Rate: 400e6, Length: 1035, Wraps: 280, Load: 12 * time.Second, Unload: 27 * time.Second, AvgLocate: 65 * time.Second},
	// Enterprise drives. IBM TS1160 on JE media: 400 MB/s native, 20 TB
	// native (IBM TS4500 documentation, "Supported tape drives", table 2).
	// Oracle StorageTek T10000D: 8.5 TB native (Oracle, "StorageTek T10000
	// Tape Drive System Assurance Guide", chapter 1) at 252 MB/s native
	// (Oracle's T10000D data sheet). Load, unload, locate, length and wraps
	// are not in the sheets cited here: the LTO-9 preset's are assumed, so
	// a study of either drive should set [tape.drive] load, unload,
	// avg_locate from the vendor's current sheet.
	"TS1160":  {Name: "TS1160", Capacity: 20000e9, Rate: 400e6, Length: 1035, Wraps: 280, Load: 16 * time.Second, Unload: 20 * time.Second, AvgLocate: 65 * time.Second},
	"T10000D": {Name: "T10000D", Capacity: 8500e9, Rate: 252e6, Length: 1035, Wraps: 280, Load: 16 * time.Second, Unload: 20 * time.Second, AvgLocate: 65 * time.Second},
}

func init() {
	for k, g := range Generations {
		g.LocateStart = 3 * time.Second
		g.WrapChange = time.Second
		g.Backhitch = 2 * time.Second
		g.Exchange = 10 * time.Second // robot move to drive, Versity figure
		Generations[k] = g
	}
}

// GenerationNames lists the presets in order.
func GenerationNames() []string {
	var n []string
	for k := range Generations {
		n = append(n, k)
	}
	// LTO-2 before LTO-10: by name length, then by name
	sort.Slice(n, func(i, j int) bool {
		if len(n[i]) != len(n[j]) {
			return len(n[i]) < len(n[j])
		}
		return n[i] < n[j]
	})
	return n
}

// LookupGeneration finds a preset by name ("LTO-9", "lto9").
func LookupGeneration(name string) (Generation, error) {
	norm := strings.ToUpper(strings.ReplaceAll(name, "-", ""))
	for k, g := range Generations {
		if strings.ReplaceAll(k, "-", "") == norm {
			return g, nil
		}
	}
	return Generation{}, fmt.Errorf("tape generation %q: want one of %s", name, strings.Join(GenerationNames(), ", "))
}

// Position is a place on a tape: the wrap, and the longitudinal position
// along it in metres from the beginning of tape (BOT). Even wraps run away
// from BOT, odd wraps back towards it (serpentine layout).
type Position struct {
	Wrap int
	LPos float64
}

// BytesPerWrap is the native capacity of one wrap.
func (g Generation) BytesPerWrap() float64 { return float64(g.Capacity) / float64(g.Wraps) }

// PositionOf maps a byte offset from the start of the cartridge's data to
// its physical position.
func (g Generation) PositionOf(off int64) Position {
	if off < 0 {
		off = 0
	}
	bpw := g.BytesPerWrap()
	w := int(float64(off) / bpw)
	if w >= g.Wraps {
		w = g.Wraps - 1
	}
	f := (float64(off) - float64(w)*bpw) / bpw
	f = math.Min(math.Max(f, 0), 1)
	if w%2 == 1 {
		f = 1 - f
	}
	return Position{Wrap: w, LPos: f * g.Length}
}

// PositionIn is PositionOf on a cartridge that holds capacity bytes: a
// cartridge smaller than the generation's (tests, demonstrations, the
// simulator's scaled studies) is spread over the whole tape, so its tape
// files are as far apart, in locate time, as those of a full cartridge.
func (g Generation) PositionIn(off, capacity int64) Position {
	if capacity <= 0 || capacity == g.Capacity {
		return g.PositionOf(off)
	}
	return g.PositionOf(int64(float64(off) * float64(g.Capacity) / float64(capacity)))
}

// LocateSpeed is the tape speed while positioning, in m/s, chosen so that a
// locate from BOT to a uniformly random position averages AvgLocate.
func (g Generation) LocateSpeed() float64 {
	d := (g.AvgLocate - g.LocateStart - g.WrapChange).Seconds()
	if d <= 0 {
		d = 1
	}
	return (g.Length / 2) / d
}

// LocateTime is the time to move from a to b. Staying put costs nothing;
// any move pays LocateStart, the distance at LocateSpeed, and WrapChange
// if the wrap differs.
func (g Generation) LocateTime(a, b Position) time.Duration {
	if a == b {
		return 0
	}
	t := g.LocateStart + seconds(math.Abs(b.LPos-a.LPos)/g.LocateSpeed())
	if a.Wrap != b.Wrap {
		t += g.WrapChange
	}
	return t
}

// TransferTime is the time to stream n bytes at the native rate.
func (g Generation) TransferTime(n int64) time.Duration {
	return seconds(float64(n) / g.Rate)
}

// ReadThroughTime is the time to get from logical offset from to to (not
// behind it) by reading on: streaming the bytes between at the native rate.
// On a cartridge smaller than the generation's (see PositionIn) the gap is
// scaled as its positions are, so it covers the tape it stands for.
func (g Generation) ReadThroughTime(from, to, capacity int64) time.Duration {
	gap := float64(max(to-max(from, 0), 0))
	if capacity > 0 && capacity != g.Capacity {
		gap *= float64(g.Capacity) / float64(capacity)
	}
	return seconds(gap / g.Rate)
}

// Reach says how a drive whose head is at logical offset from gets to to
// the quicker way, and what it costs: reading on through the gap (forward
// only) when that streams in less time than a locate takes — a few MiB
// against seconds of stopping, moving and settling — or else locating.
func (g Generation) Reach(from, to, capacity int64) (readOn bool, t time.Duration) {
	loc := g.LocateTime(g.PositionIn(from, capacity), g.PositionIn(to, capacity))
	if from < 0 || to < from {
		return false, loc
	}
	if rt := g.ReadThroughTime(from, to, capacity); rt <= loc {
		return true, rt
	}
	return false, loc
}

// RewindTime is the time to go from p back to BOT.
func (g Generation) RewindTime(p Position) time.Duration {
	return g.LocateTime(p, Position{})
}

// MountTime is a robot exchange plus the load and thread.
func (g Generation) MountTime() time.Duration { return g.Exchange + g.Load }

// DismountTime is rewinding from p, unloading, and the robot's exchange.
func (g Generation) DismountTime(p Position) time.Duration {
	return g.RewindTime(p) + g.Unload + g.Exchange
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
