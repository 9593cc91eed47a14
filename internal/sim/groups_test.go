package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// A study written as one client group on one server class is the same
// study: the same events, the same rates.
func TestOneGroupIsThePlainStudy(t *testing.T) {
	plain := `[clients]
count = 3
nic = "200MB/s"
[servers]
count = 2
nic = "400MB/s"
[storage]
kind = "raid5"
per_server = 2
[storage.array]
disks = 5
[workload]
op = "read"
streams = 2
record = "4MiB"
file_size = "256MiB"
`
	grouped := `[servers]
nic = "400MB/s"
[[servers.class]]
name = "arrays"
count = 2
[servers.class.storage]
kind = "raid5"
per_server = 2
[servers.class.storage.array]
disks = 5
[workload]
record = "4MiB"
file_size = "256MiB"
[[clients.group]]
name = "users"
count = 3
nic = "200MB/s"
op = "read"
streams = 2
`
	a, b := run(t, mustParse(t, plain)), run(t, mustParse(t, grouped))
	if a.Fingerprint != b.Fingerprint || a.MBps != b.MBps || a.Events != b.Events {
		t.Errorf("plain %s %.2f MB/s %d events, grouped %s %.2f MB/s %d events", a.Fingerprint, a.MBps, a.Events, b.Fingerprint, b.MBps, b.Events)
	}
	if len(b.Groups) != 1 || b.Groups[0].MBps != a.MBps || b.Groups[0].Streams != 6 || b.Groups[0].Class != "arrays" {
		t.Errorf("groups %+v, want one with the study's %.2f MB/s and 6 streams", b.Groups, a.MBps)
	}
	if a.Bound.MBps != b.Groups[0].Alone {
		t.Errorf("bound %.2f, the group's alone %.2f", a.Bound.MBps, b.Groups[0].Alone)
	}
}

// curveClass is a [[servers.class]] of count servers with two curve
// devices each at rate both ways.
func curveClass(name string, count int, rate string) string {
	return fmt.Sprintf(`[[servers.class]]
name = %q
count = %d
[servers.class.storage]
kind = "curve"
per_server = 2
[servers.class.storage.curve]
read_rate = %q
write_rate = %q
`, name, count, rate, rate)
}

// twoClasses is two classes of curve devices and two groups: writers on
// "fast", readers on "slow", with the switch given.
func twoClasses(sw, readerOp, extra string) string {
	return `[network]
switch = "` + sw + `"
[servers]
nic = "10GB/s"
` + curveClass("fast", 2, "500MB/s") + curveClass("slow", 1, "150MB/s") + `[workload]
record = "1MiB"
file_size = "300MiB"
[[clients.group]]
name = "writers"
count = 4
nic = "1GB/s"
op = "write"
class = "fast"
[[clients.group]]
name = "readers"
count = 2
nic = "1GB/s"
class = "slow"
op = "` + readerOp + `"
` + extra
}

// srcClass is a third class for a copy to read from.
var srcClass = "from = \"src\"\n" + curveClass("src", 1, "500MB/s")

// Groups on classes of their own, through a switch that does not bind,
// run as each would alone; through a switch that binds, they share it
// max-min, flow by flow, and the bound names it. A copy runs at the
// least of its reads and its writes and crosses the switch twice.
func TestGroupsShareOnlyWhatTheyShare(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sw, op  string
		extra   string
		writers float64 // MB/s; 0: see switchFull
		readers float64
		total   float64 // the bound
		binds   string
	}{
		// writers: 4 streams on 4 devices at 500; readers: 2 on 2 at 150
		{"their own classes", "0", "read", "", 2000, 300, 2300, "writers + readers"},
		// the switch's 1,150 max-min over 6 flows: the readers' 150
		// each, the writers the rest
		{"a switch that binds", "1150MB/s", "read", "", 850, 300, 1150, "switch"},
		// 2 streams read at 500 and write at 150
		{"a copy", "0", "copy", srcClass, 2000, 300, 2300, "writers + readers"},
		// 2,000 + 2 × 300 on a switch of 1,300
		{"a copy through a switch", "1300MB/s", "copy", srcClass, 0, 0, 1300, "switch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, mustParse(t, twoClasses(tc.sw, tc.op, tc.extra)))
			if len(r.Groups) != 2 {
				t.Fatalf("groups %+v", r.Groups)
			}
			if tc.writers == 0 {
				// the writers' bytes cross the switch once, the copy's
				// twice: never more than it carries; both groups slowed
				through := float64(r.Groups[0].Bytes+2*r.Groups[1].Bytes) / r.Seconds / 1e6
				if w, c := r.Groups[0].MBps, r.Groups[1].MBps; through > 1300*1.001 || w > 1300 || c > 0.9*300 {
					t.Errorf("writers %.1f, copy %.1f MB/s; %.1f MB/s through a switch of 1300", w, c, through)
				}
			}
			for i, want := range []float64{tc.writers, tc.readers} {
				if g := r.Groups[i]; want > 0 && math.Abs(g.MBps-want)/want > 0.02 {
					t.Errorf("group %s: %.1f MB/s, want %.0f", g.Name, g.MBps, want)
				}
			}
			if math.Abs(r.Bound.MBps-tc.total)/tc.total > 0.01 || r.Bound.Binding != tc.binds {
				t.Errorf("bound %.1f MB/s binding %q, want %.0f %q", r.Bound.MBps, r.Bound.Binding, tc.total, tc.binds)
			}
			if tc.op == "copy" && (r.Groups[1].Op != "copy" || r.Groups[1].From != "src") {
				t.Errorf("copy group %+v", r.Groups[1])
			}
		})
	}
}

// Two groups on one class meet at its devices: the class's term in the
// bound caps their sum, and the DES shares the devices between them.
func TestGroupsOnOneClass(t *testing.T) {
	s := strings.Replace(twoClasses("0", "read", ""), `class = "slow"`, `class = "fast"`, 1)
	s = strings.Replace(s, "count = 2\nnic = \"1GB/s\"\nclass", "count = 4\nnic = \"1GB/s\"\nclass", 1)
	r := run(t, mustParse(t, s))
	// 8 streams on 4 devices at 500: 2,000 in all
	if math.Abs(r.Bound.MBps-2000) > 1 || r.Bound.Binding != "class fast" {
		t.Errorf("bound %.1f MB/s binding %q, want 2000 class fast", r.Bound.MBps, r.Bound.Binding)
	}
	sum := r.Groups[0].MBps + r.Groups[1].MBps
	if math.Abs(sum-2000)/2000 > 0.02 {
		t.Errorf("groups %.1f + %.1f MB/s, want 2000 together", r.Groups[0].MBps, r.Groups[1].MBps)
	}
}

// A sweep sets a group's keys by its name.
func TestSweepSetsAGroupsKeys(t *testing.T) {
	st, err := ParseStudy([]byte(twoClasses("0", "read", "") + "[sweep]\n\"clients.group.readers.count\" = [\"1\", \"2\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := st.RunSweep(1, 2, nil)
	if r.Failed() != 0 {
		t.Fatalf("points %+v", r.Points)
	}
	for i, want := range []int{1, 2} {
		if g := r.Points[i].Result.Groups[1]; g.Streams != want {
			t.Errorf("point %d: readers have %d streams, want %d", i, g.Streams, want)
		}
	}
	if _, err := st.Override(map[string]string{"clients.group.nobody.count": "3"}); err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("unknown group: %v", err)
	}
}

func TestGroupErrors(t *testing.T) {
	base := twoClasses("0", "read", "")
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown class", `class = "slow"`, `class = "tape"`, `class "tape"`},
		{"copy without from", `op = "read"`, `op = "copy"`, "needs from"},
		{"copy onto its source", `op = "read"`, "op = \"copy\"\nfrom = \"slow\"", "another class"},
		{"from without a copy", `op = "read"`, "op = \"read\"\nfrom = \"fast\"", "only a copy"},
		{"from an unknown class", `op = "read"`, "op = \"copy\"\nfrom = \"tape\"", `from "tape"`},
		{"an unknown op", `op = "read"`, `op = "append"`, `op "append"`},
		{"a group twice", `name = "readers"`, `name = "writers"`, "named twice"},
		{"a class twice", `name = "slow"`, `name = "fast"`, "named twice"},
		{"a group without a name", `name = "readers"`, `name = ""`, "want a name"},
		{"a class's bad storage", `kind = "curve"`, `kind = "floppy"`, `servers.class "fast": storage.kind`},
		{"a tape study", "[workload]", "[workload]\nop = \"recall\"", "stream workloads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(base, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func mustParse(t *testing.T, s string) *Config {
	t.Helper()
	c, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A study file, whatever it holds, parses or fails with an error; one
// that parses has a bound, and every group a part on a class.
func FuzzParseStudy(f *testing.F) {
	f.Add(twoClasses("0", "copy", srcClass))
	f.Add(twoClasses("1GB/s", "read", ""))
	f.Add("[workload]\nop = \"write\"\n[[clients.group]]\nname = \"a\"\n")
	f.Add("[[servers.class]]\nname = \"x\"\n[servers.class.storage]\nkind = \"raid6\"\n[servers.class.storage.array]\ndisks = 6\n")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStudy([]byte(s))
		if err != nil {
			return
		}
		c := st.Config
		if b := Bound(c); math.IsNaN(b.MBps) || b.MBps < 0 {
			t.Fatalf("bound %v", b)
		}
		if len(c.parts) == 0 || len(c.classes) == 0 {
			t.Fatalf("%d groups on %d classes", len(c.parts), len(c.classes))
		}
		for _, p := range c.parts {
			if p.class < 0 || p.class >= len(c.classes) || p.c == nil || p.from >= 0 && p.src == nil {
				t.Fatalf("group %+v", p)
			}
		}
	})
}
