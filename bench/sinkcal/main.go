// Command sinkcal measures the client side of a get into a local file —
// the term `strata sim` calls the sink — in the run that isolates it: a
// file of --size bytes written into --dir (the page cache: timed apart)
// and then fsynced (timed alone), --reps times. It prints a study fragment
// for `strata sim calibrate --sink`:
//
//	go run ./bench/sinkcal --dir /var/tmp --size 128MiB --reps 5 > sink.toml
//
// sink_rate is the median fsync rate (what the disk writes a dirty file
// at); sink_dirty is the kernel's background-writeback threshold
// (dirty_background_bytes, or dirty_background_ratio of available memory);
// sink_copy is the median rate of the writes into the page cache (the
// copy a get makes after each read). On a virtual machine whose host backs
// new pages on first touch, a file written into pages not used before
// pays the host's rate instead (this project's machine: the first file
// 365 MB/s, the others ~5 GB/s); the model does not have that.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/bench"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the client's disk (where gets write)")
	sizeS := flag.String("size", "128MiB", "bytes per file")
	reps := flag.Int("reps", 5, "files written and fsynced")
	flag.Parse()
	size, err := bench.ParseSize(*sizeS)
	if err != nil || size <= 0 {
		fail(fmt.Errorf("--size %q: want a size such as 128MiB", *sizeS))
	}
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>9) // not zeros: no file system may skip them
	}
	var cache, flush []float64
	for r := 0; r < *reps; r++ {
		f, err := os.CreateTemp(*dir, "sinkcal-*")
		if err != nil {
			fail(err)
		}
		t0 := time.Now()
		for off := int64(0); off < size; off += int64(len(buf)) {
			n := min(int64(len(buf)), size-off)
			if _, err := f.Write(buf[:n]); err != nil {
				fail(err)
			}
		}
		t1 := time.Now()
		if err := f.Sync(); err != nil {
			fail(err)
		}
		t2 := time.Now()
		f.Close()
		os.Remove(f.Name())
		cache = append(cache, float64(size)/t1.Sub(t0).Seconds())
		flush = append(flush, float64(size)/t2.Sub(t1).Seconds())
	}
	dirty, how := dirtyThreshold()
	fmt.Printf("# bench/sinkcal: %d × %s written into %s, then fsynced (%s)\n", *reps, *sizeS, *dir, time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("# into the page cache: median %.0f MB/s (%s)\n", median(cache)/1e6, list(cache))
	fmt.Printf("# fsync: median %.0f MB/s (%s)\n", median(flush)/1e6, list(flush))
	fmt.Printf("# dirty threshold: %s\n[clients]\nsink_rate = \"%.0fMB/s\"\nsink_dirty = \"%dMB\"\nsink_copy = \"%.0fMB/s\"\n", how, median(flush)/1e6, dirty/1e6, median(cache)/1e6)
}

// dirtyThreshold is where the kernel starts writing dirty pages back in
// the background.
func dirtyThreshold() (int64, string) {
	if b := readInt("/proc/sys/vm/dirty_background_bytes"); b > 0 {
		return b, "vm.dirty_background_bytes"
	}
	ratio := readInt("/proc/sys/vm/dirty_background_ratio")
	avail := bench.MemInfo("MemAvailable")
	return avail * ratio / 100, fmt.Sprintf("vm.dirty_background_ratio %d %% of %d MB available", ratio, avail/1e6)
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func list(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.0f", x/1e6))
	}
	return strings.Join(s, ", ")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sinkcal:", err)
	os.Exit(1)
}
