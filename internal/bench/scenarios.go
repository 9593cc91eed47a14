package bench

import (
	"fmt"
	"sort"
	"time"
)

// The suite, in the order `strata bench list` shows it. Patterns name the
// IOR, mdtest or fio run that does the same (see docs/BENCHMARKS.md).
func init() {
	register(Scenario{"hpcs01", "single stream, large blocks, half duplex", "ior -w -e -t B -b S (1 rank), then -r; fio rw=write then rw=read, numjobs=1", hpcs01})
	register(Scenario{"hpcs02", "single stream, large blocks, full duplex", "fio: a rw=write and a rw=read job at once, same bs", hpcs02})
	register(Scenario{"hpcs03", "multiple streams, large blocks, full duplex", "fio: N rw=write and N rw=read jobs at once", hpcs03})
	register(Scenario{"hpcs04", "extreme file creation rates", "mdtest -C -F -n F [-u] [-w 1]; fio ioengine=filecreate", hpcs04})
	register(Scenario{"hpcs05", "checkpoint/restart, large I/O, shared file N-1, segmented", "ior -t A -b 50A -s 1 (shared file)", hpcs05})
	register(Scenario{"hpcs06", "checkpoint/restart, small I/O, shared file N-1, strided (10,000 Real*8)", "ior -t 80000 -b Z*80000 -s 50 (shared file)", hpcs06})
	register(Scenario{"hpcs07", "checkpoint/restart, large I/O, file per process N-N", "ior -F -t A -b 50A", hpcs07})
	register(Scenario{"hpcs08", "checkpoint/restart, small I/O, file per process N-N", "ior -F -t 80000 -b Z*80000 -s 50", hpcs08})
	register(Scenario{"hpcs09", "walking a directory tree, one process", "readdir + stat of every entry; mdtest -T on a tree; pfind -np 1", hpcs09})
	register(Scenario{"hpcs10", "walking a directory tree, parallel", "pfind (IO500 find) with P ranks", hpcs10})
	register(Scenario{"hpcs11", "random stat(), one process", "mdtest -T -R -F -n N (1 rank); fio ioengine=filestat", hpcs11})
	register(Scenario{"hpcs12", "random stat(), many processes", "mdtest -T -R -F -N 1 with P ranks", hpcs12})
	register(Scenario{"hpcs13", "small-block random I/O, file per process", "ior -F -z -t 4k; fio rw=randread/randwrite, one file per job", hpcs13})
	register(Scenario{"hpcs14", "small-block random I/O, one shared file", "ior -z -t 4k (shared); fio numjobs=N on one filename", hpcs14})
	register(Scenario{"cemss-char", "CeMSS standard characteristic: throughput against I/O size, 8 KiB to 160 MiB", "fio rw=write/read, bs swept, numjobs=1", cemssChar})
	register(Scenario{"cemss-user", "CeMSS user I/O pattern: 2 MiB requests building large files", "ior -F -t 2m -b FILE", cemssUser})
	register(Scenario{"iozone", "IOzone-style matrix: record size × file size, write (fsync) and read (cold)", "iozone -a -e -c -i 0 -i 1", iozone})
	register(Scenario{"md-rates", "HPSS-style metadata rates: create 0 B and 1 B, stat, delete", "mdtest -F -u -n F [-w 1 -e 1]", mdRates})
	register(Scenario{"scaling", "N clients × M servers, against S = min(N·I, M·I, P·R)", "ior -F with N ranks, files striped over M servers", scaling})
}

// streamPair writes files and reads them back (shifted), the common shape
// of the capture and checkpoint scenarios.
func (r *Run) streamPair(res *Result, fs []file, size, rec int64, deadline time.Duration) {
	phs, counts := r.seqWrite("write", fs, size, rec, deadline, nil, nil)
	r.add(res, phs[0])
	if phs[0].Error != "" {
		return
	}
	r.add(res, r.seqRead("read", fs, counts, size, rec, 1))
}

func hpcs01(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	res.param("file_size", sizeStr(r.S.StreamSize))
	res.param("block", sizeStr(r.S.Block))
	r.streamPair(res, files(d, 1, "stream"), r.S.StreamSize, r.S.Block, r.S.Deadline)
	return nil
}

// duplex runs s writers and s readers at once (readers on files written
// beforehand, untimed).
func (r *Run) duplex(res *Result, s int) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	res.param("streams", fmt.Sprintf("%d writers + %d readers", s, s))
	res.param("file_size", sizeStr(r.S.StreamSize))
	res.param("block", sizeStr(r.S.Block))
	readers := files(d, s, "old")
	pre, _ := r.seqWrite("prefill", readers, r.S.StreamSize, r.S.Block, 0, nil, nil)
	if pre[0].Error != "" {
		return fmt.Errorf("prefill: %s", pre[0].Error)
	}
	cache := r.T.DropCache(r.ctx, d)
	role := func(id int) string {
		if id < s {
			return "write"
		}
		return "read"
	}
	phs, _ := r.seqWrite("duplex", files(d, s, "new"), r.S.StreamSize, r.S.Block, r.S.Deadline, role, readers)
	for _, ph := range phs {
		if ph.Name == "read" {
			ph.Cache, ph.Verify = cache, r.verifyMode()
			if containsVerify(ph.Error) {
				ph.VerifyErrors++
			}
		}
		r.add(res, ph)
	}
	res.Notes = append(res.Notes, "both directions run at once; each is timed from the common barrier to its own last stream's end")
	return nil
}

func hpcs02(r *Run, res *Result) error { return r.duplex(res, 1) }
func hpcs03(r *Run, res *Result) error { return r.duplex(res, max(2, r.Workers)) }

// createVariant is one create benchmark of scenario 4.
type createVariant struct {
	name   string
	shared bool
	data   []byte
}

func hpcs04(r *Run, res *Result) error {
	res.param("files_per_worker", r.S.Files)
	res.param("workers", r.Workers)
	res.param("repetitions", r.S.Reps)
	for _, v := range []createVariant{{"create 0 B, a directory per worker", false, nil}, {"create 0 B, one shared directory", true, nil}, {"create 1 B, a directory per worker", false, []byte{'x'}}} {
		var lists [][]string
		ph := r.repeat(r.S.Reps, func(rep int) error {
			d, err := r.fresh(res.Scenario, fmt.Sprint(rep))
			if err != nil {
				return err
			}
			dirs, err := r.mdDirs(d, r.Workers, v.shared)
			lists = fileLists(dirs, r.S.Files)
			return err
		}, func(rep int) error {
			return r.T.RemoveAll(r.ctx, r.dir(res.Scenario, fmt.Sprint(rep)))
		}, func(rep int) PhaseSpec { return r.mdPhase(v.name, lists, r.touchOp(v.data)) })
		ph.Durability = r.info.MetaDurability
		r.add(res, ph)
	}
	res.Notes = append(res.Notes, "each repetition on a fresh directory tree, removed (untimed) afterwards; the median repetition is reported with all rates")
	return nil
}

// checkpoint sizes: scenario 5 dumps MemFrac of memory as 50 arrays per
// process; scenario 6 half as much, as 50 arrays of Z blocks of 10,000
// Real*8 (80,000 bytes).
const (
	arrays     = 50
	real8Block = 80000
)

func (r *Run) ckptLarge() (perWorker, array int64) {
	total := int64(r.S.MemFrac * float64(r.env.MemBytes))
	array = max(total/int64(r.Workers)/arrays/4096*4096, 4096)
	return array * arrays, array
}

func (r *Run) ckptSmallZ() int64 {
	total := int64(r.S.MemFrac / 2 * float64(r.env.MemBytes))
	return max(total/int64(r.Workers)/arrays/real8Block, 1)
}

func hpcs05(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	per, array := r.ckptLarge()
	res.param("workers", r.Workers)
	res.param("bytes_per_worker", sizeStr(per))
	res.param("transfer", sizeStr(array))
	res.param("layout", "segmented: worker k owns bytes [k·S, (k+1)·S)")
	f := files(d, 1, "ckpt")[0]
	ph, blocks := r.sharedWrite("write", f, r.Workers, per, array, 1, 0)
	r.add(res, ph)
	if ph.Error == "" && ph.Skipped == "" {
		r.add(res, r.sharedRead("read", f, r.Workers, per, array, blocks, 1))
	}
	return nil
}

func hpcs06(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	z := r.ckptSmallZ()
	res.param("workers", r.Workers)
	res.param("Z", z)
	res.param("transfer", real8Block)
	res.param("layout", fmt.Sprintf("strided by array: array a, worker k at (a·N + k)·%d bytes", z*real8Block))
	f := files(d, 1, "ckpt")[0]
	ph, blocks := r.sharedWrite("write", f, r.Workers, z*real8Block, real8Block, arrays, 0)
	r.add(res, ph)
	if ph.Error == "" && ph.Skipped == "" {
		r.add(res, r.sharedRead("read", f, r.Workers, z*real8Block, real8Block, blocks, 1))
	}
	return nil
}

func hpcs07(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	per, array := r.ckptLarge()
	res.param("workers", r.Workers)
	res.param("file_size", sizeStr(per))
	res.param("transfer", sizeStr(array))
	r.streamPair(res, files(d, r.Workers, "ckpt"), per, array, 0)
	return nil
}

func hpcs08(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	z := r.ckptSmallZ()
	res.param("workers", r.Workers)
	res.param("file_size", sizeStr(arrays*z*real8Block))
	res.param("transfer", real8Block)
	r.streamPair(res, files(d, r.Workers, "ckpt"), arrays*z*real8Block, real8Block, 0)
	return nil
}

func (r *Run) walkScenario(res *Result, workers int) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	depth, fan, per := r.S.Tree[0], r.S.Tree[1], r.S.Tree[2]
	res.param("tree", fmt.Sprintf("depth %d, fan-out %d, %d files per directory", depth, fan, per))
	res.param("walkers", workers)
	build, entries := r.makeTree(d+"/tree", depth, fan, per)
	r.add(res, build)
	if build.Error != "" {
		return nil
	}
	res.param("entries", entries)
	cache := r.T.DropCache(r.ctx, d)
	cold := r.walkTree("walk (cold)", d+"/tree", workers)
	cold.Cache = cache
	r.add(res, cold)
	warm := r.walkTree("walk (warm)", d+"/tree", workers)
	warm.Cache = "warm: right after the cold walk"
	r.add(res, warm)
	res.Notes = append(res.Notes, "ops are readdirs plus stats: every directory listed, every entry stat'ed")
	return nil
}

func hpcs09(r *Run, res *Result) error { return r.walkScenario(res, 1) }
func hpcs10(r *Run, res *Result) error { return r.walkScenario(res, max(2, r.Workers)) }

// randomStat builds two copies of a flat set of files, stats one warm and
// the other after dropping caches (HPCS: a cold cache is a different copy
// of the tree), in random order.
func (r *Run) randomStat(res *Result, workers int) error {
	res.param("files", r.S.Files*r.Workers)
	res.param("workers", workers)
	var copies [2][][]string
	for c := range copies {
		d, err := r.fresh(res.Scenario, fmt.Sprint("copy", c))
		if err != nil {
			return err
		}
		dirs, err := r.mdDirs(d, r.Workers, false)
		if err != nil {
			return err
		}
		copies[c] = fileLists(dirs, r.S.Files)
		ph := r.runPhase(r.mdPhase(fmt.Sprintf("create copy %c", 'A'+c), copies[c], r.touchOp(nil)))
		ph.Durability = r.info.MetaDurability
		r.add(res, ph)
		if ph.Error != "" {
			return nil
		}
	}
	warmup := r.runPhase(r.mdPhase("warm-up", shuffled(copies[0], workers, 1), r.statOp))
	if warmup.Error != "" {
		return fmt.Errorf("warm-up: %s", warmup.Error)
	}
	warm := r.runPhase(r.mdPhase("stat random (warm)", shuffled(copies[0], workers, 2), r.statOp))
	warm.Cache = "warm: copy A, stat'ed once before"
	r.add(res, warm)
	cache := r.T.DropCache(r.ctx, r.dir(res.Scenario))
	cold := r.runPhase(r.mdPhase("stat random (cold)", shuffled(copies[1], workers, 3), r.statOp))
	cold.Cache = "copy B, never stat'ed; " + cache
	r.add(res, cold)
	return nil
}

func hpcs11(r *Run, res *Result) error { return r.randomStat(res, 1) }
func hpcs12(r *Run, res *Result) error { return r.randomStat(res, max(2, r.Workers)) }

func hpcs13(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	res.param("workers", r.Workers)
	res.param("file_size", sizeStr(r.S.RandSize))
	res.param("deadline", r.S.Deadline)
	for _, bs := range []int64{4 << 10, 128 << 10} {
		r.randomIO(res, files(d, r.Workers, fmt.Sprint("rand", bs)), r.S.RandSize, bs, false)
	}
	res.Notes = append(res.Notes, "offsets uniformly random over each worker's own file (repeats allowed, as fio norandommap)")
	return nil
}

func hpcs14(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	size := r.S.RandSize * int64(r.Workers)
	res.param("workers", r.Workers)
	res.param("file_size", sizeStr(size))
	res.param("deadline", r.S.Deadline)
	for _, bs := range []int64{4 << 10, 128 << 10} {
		r.randomIO(res, files(d, 1, fmt.Sprint("rand", bs)), size, bs, true)
	}
	res.Notes = append(res.Notes, "all workers at uniformly random offsets over the whole shared file")
	return nil
}

// CharacteristicSizes are CeMSS's I/O sizes, 8 KiB to 160 MiB.
var CharacteristicSizes = []int64{8 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 160 << 20}

func cemssChar(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	res.param("file_size", fmt.Sprintf("%s (at least two requests)", sizeStr(r.S.SweepSize)))
	res.param("deadline", r.S.Deadline)
	res.param("io_sizes", fmt.Sprintf("8KiB … %s", sizeStr(min(r.S.MaxIO, CharacteristicSizes[len(CharacteristicSizes)-1]))))
	for i, io := range CharacteristicSizes {
		if io > r.S.MaxIO {
			break
		}
		size := max(r.S.SweepSize/io, 2) * io
		fs := files(d, 1, fmt.Sprint("char", i))
		phs, counts := r.seqWrite("write "+sizeStr(io), fs, size, io, r.S.Deadline, nil, nil)
		w := phs[0]
		w.Series, w.X, w.Labels = "write", float64(io), map[string]string{"io_size": sizeStr(io)}
		r.add(res, w)
		if w.Error != "" {
			return nil
		}
		rd := r.seqRead("read "+sizeStr(io), fs, counts, size, io, 0)
		rd.Series, rd.X, rd.Labels = "read", float64(io), map[string]string{"io_size": sizeStr(io)}
		r.add(res, rd)
		r.T.Remove(r.ctx, fs[0].path)
	}
	return nil
}

func cemssUser(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	res.param("workers", r.Workers)
	res.param("file_size", sizeStr(r.S.UserFile))
	res.param("request", "2MiB")
	r.streamPair(res, files(d, r.Workers, "user"), r.S.UserFile, 2<<20, r.S.Deadline)
	return nil
}

func iozone(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	res.param("file_sizes", fmt.Sprintf("1MiB … %s, ×4", sizeStr(r.S.IOzoneMax)))
	res.param("record_sizes", "64KiB … 16MiB, ×4, up to the file size")
	for fsz := int64(1 << 20); fsz <= r.S.IOzoneMax; fsz *= 4 {
		for rec := int64(64 << 10); rec <= min(fsz, 16<<20); rec *= 4 {
			labels := map[string]string{"file_size": sizeStr(fsz), "record": sizeStr(rec)}
			fs := files(d, 1, fmt.Sprintf("iozone.%d.%d", fsz, rec))
			phs, counts := r.seqWrite(fmt.Sprintf("write %s/%s", sizeStr(fsz), sizeStr(rec)), fs, fsz, rec, 0, nil, nil)
			w := phs[0]
			w.Series, w.X, w.Labels = "write "+sizeStr(fsz), float64(rec), labels
			r.add(res, w)
			if w.Error != "" {
				return nil
			}
			rd := r.seqRead(fmt.Sprintf("read %s/%s", sizeStr(fsz), sizeStr(rec)), fs, counts, fsz, rec, 0)
			rd.Series, rd.X, rd.Labels = "read "+sizeStr(fsz), float64(rec), labels
			r.add(res, rd)
			r.T.Remove(r.ctx, fs[0].path)
		}
	}
	res.Notes = append(res.Notes, "writes include open, fsync and close (iozone -e -c); reads follow a cache drop")
	return nil
}

func mdRates(r *Run, res *Result) error {
	res.param("workers", r.Workers)
	res.param("files_per_worker", r.S.Files)
	res.param("repetitions", r.S.Reps)
	for _, size := range []int{0, 1} {
		ops := []string{fmt.Sprintf("create %d B", size), fmt.Sprintf("stat %d B", size), fmt.Sprintf("delete %d B", size)}
		reps := make([][]Phase, len(ops))
		for rep := range r.S.Reps {
			d, err := r.fresh(res.Scenario, fmt.Sprint(rep))
			if err != nil {
				return err
			}
			dirs, err := r.mdDirs(d, r.Workers, false)
			if err != nil {
				return err
			}
			lists := fileLists(dirs, r.S.Files)
			data := make([]byte, size)
			for i, op := range []func(w *Worker, p string) error{r.touchOp(data), r.statOp, r.removeOp} {
				ph := r.runPhase(r.mdPhase(ops[i], lists, op))
				reps[i] = append(reps[i], ph)
				if ph.Error != "" {
					r.add(res, ph)
					return nil
				}
			}
			r.T.RemoveAll(r.ctx, d)
		}
		for i := range ops {
			ph := median(reps[i])
			if i == 0 {
				ph.Durability = r.info.MetaDurability
			}
			r.add(res, ph)
		}
	}
	res.Notes = append(res.Notes, "each repetition: create, stat, delete on a fresh directory per worker; the median repetition is reported with all rates")
	return nil
}

// median picks the median repetition by rate and lists every rate.
func median(phs []Phase) Phase {
	sorted := append([]Phase(nil), phs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].OpsPerSec < sorted[j].OpsPerSec })
	m := sorted[len(sorted)/2]
	m.Repeats = nil
	for _, ph := range sorted {
		m.Repeats = append(m.Repeats, ph.OpsPerSec)
	}
	return m
}

func scaling(r *Run, res *Result) error {
	d, err := r.fresh(res.Scenario)
	if err != nil {
		return err
	}
	size := max(r.S.StreamSize/4, 16<<20)
	res.param("bytes_per_client", sizeStr(size))
	res.param("transfer", sizeStr(r.S.Block))
	servers := []int{1}
	if r.info.Kind == "strata" {
		for m := 2; m <= min(r.S.ScalingMax, r.info.Devices); m *= 2 {
			servers = append(servers, m)
		}
		res.Notes = append(res.Notes, "servers = devices each file is striped over (each device stands for one disk server)")
	} else {
		res.Notes = append(res.Notes, "a file system is one server here: M = 1")
	}
	var clients []int
	for n := 1; n <= r.S.ScalingMax; n *= 2 {
		clients = append(clients, n)
	}
	unit := map[string]float64{} // the 1 × 1 rate of each direction: I (and R)
	for _, m := range servers {
		for _, n := range clients {
			fs := files(d, n, fmt.Sprintf("s%d.c%d", m, n))
			labels := map[string]string{"clients": fmt.Sprint(n), "servers": fmt.Sprint(m)}
			phs, counts := r.seqWriteStriped(fmt.Sprintf("write N=%d M=%d", n, m), fs, size, r.S.Block, r.S.Deadline, nil, nil, m)
			w := phs[0]
			w.Series, w.X, w.Labels = fmt.Sprintf("write M=%d", m), float64(n), labels
			r.add(res, w)
			if w.Error != "" {
				return nil
			}
			rd := r.seqRead(fmt.Sprintf("read N=%d M=%d", n, m), fs, counts, size, r.S.Block, 1)
			rd.Series, rd.X, rd.Labels = fmt.Sprintf("read M=%d", m), float64(n), labels
			r.add(res, rd)
			for _, x := range []struct {
				dir string
				ph  Phase
			}{{"write", w}, {"read", rd}} {
				dir, ph := x.dir, x.ph
				if n == 1 && m == 1 {
					unit[dir] = ph.MiBps
				}
				res.Bound = append(res.Bound, bound(dir, n, m, ph.MiBps, unit[dir]))
			}
			for _, f := range fs {
				r.T.Remove(r.ctx, f.path)
			}
		}
	}
	res.Notes = append(res.Notes, "I and R are the measured 1 client × 1 server rate of each direction; on one machine clients, servers and disks share 2 CPUs and one disk, so the ratio falls where that shared limit binds")
	return nil
}

// bound evaluates S = min(N·I, M·I, P·R) with P = M (one disk per
// server) and I = R = the single-stream rate.
func bound(dir string, n, m int, measured, i float64) BoundCheck {
	b := BoundCheck{Phase: dir, Clients: n, Servers: m, Measured: measured}
	switch {
	case n < m:
		b.Bound, b.Binding = float64(n)*i, "N·I"
	case m < n:
		b.Bound, b.Binding = float64(m)*i, "M·I = P·R"
	default:
		b.Bound, b.Binding = float64(n)*i, "N·I = M·I = P·R"
	}
	if b.Bound > 0 {
		b.Ratio = measured / b.Bound
	}
	return b
}
