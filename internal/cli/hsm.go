package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/config"
)

// stagingReport tells a waiting user where a recall stands, once per
// change, on stderr when it is a terminal.
func (e *env) stagingReport(path string) func(client.StageStatus) {
	f, ok := e.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	last := ""
	return func(st client.StageStatus) {
		msg := stageLine(st)
		if msg != last && st.State != api.StageResident {
			fmt.Fprintf(f, "%s: %s\n", path, msg)
			last = msg
		}
	}
}

func stageLine(st client.StageStatus) string {
	switch st.State {
	case api.StageQueued:
		if st.Waiting != "" {
			return fmt.Sprintf("on tape %s, recall queued (%d ahead), waiting: %s", st.Volume, st.Position, st.Waiting)
		}
		return fmt.Sprintf("on tape %s, recall queued (%d ahead, about %.0f s)", st.Volume, st.Position, st.ETA)
	case api.StageActive:
		return fmt.Sprintf("recalling from tape %s", st.Volume)
	case api.StageFailed:
		return "recall failed: " + st.Error
	case api.StageOffline:
		return "on tape, no recall queued"
	}
	return st.State
}

func (e *env) stageCmd() *cobra.Command {
	var prio int
	var asJSON, recursive bool
	cmd := &cobra.Command{
		Use:   "stage [-r] PATH...",
		Short: "Queue recalls of files that are on tape (bulk prestage)",
		Long: `Queue recalls of files that are on tape only, and report each file's state:
resident (on disk already), queued (with the requests ahead of it and an
estimated time), or staging. Recalls are batched per cartridge and read in
tape order; a higher --priority is served first and mounts at once. With -r,
every file under the named directories.`,
		Args: minArgs(1, "stage [-r] PATH..."),
	}
	cmd.Flags().IntVar(&prio, "priority", 0, "priority (higher first; > 0 mounts at once)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "every file under the named directories")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		paths, err := remotes(args)
		if err != nil {
			return err
		}
		var all []client.StageStatus
		var tw *tabwriter.Writer
		if !asJSON {
			tw = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PATH\tSTATE\tVOLUME\tAHEAD\tETA")
		}
		err = treeBatches(ctx, c, "stage", paths, recursive, func(batch []string) error {
			sts, err := c.Stage(ctx, batch, prio)
			if err != nil {
				return err
			}
			if asJSON {
				all = append(all, sts...)
				return nil
			}
			for _, st := range sts {
				eta := "-"
				switch {
				case st.Waiting != "":
					eta = "waiting: " + st.Waiting
				case st.State == api.StageQueued:
					eta = fmt.Sprintf("%.0fs", st.ETA)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", st.Path, st.State, dash(st.Volume), st.Position, eta)
			}
			return tw.Flush()
		})
		if err != nil {
			return err
		}
		if asJSON {
			if all == nil {
				all = []client.StageStatus{}
			}
			return writeJSON(e.stdout, all)
		}
		return nil
	})
	return cmd
}

// Batches of a recursive migrate, purge or stage: one request each, small
// enough to answer in reasonable time, large enough that a migration still
// fills tape files of the configured aggregate.
const (
	treeBatchFiles = 10000
	treeBatchBytes = 64 << 30
)

// treeBatches calls fn with the paths to act on: those given, as given;
// with recursive, every file under them (client.Walk), in batches of at
// most treeBatchFiles files or treeBatchBytes bytes, so that neither the
// tree nor the request has to fit in memory whole. Without recursive, a
// directory is refused here with a hint, as the server would refuse it.
func treeBatches(ctx context.Context, c *client.Client, what string, paths []string, recursive bool, fn func([]string) error) error {
	return treeBatchesOf(ctx, c, what, paths, recursive, nil, fn)
}

// treeBatchesOf is treeBatches taking, of the files under a directory,
// those keep accepts (nil: all).
func treeBatchesOf(ctx context.Context, c *client.Client, what string, paths []string, recursive bool, keep func(*client.FileInfo) bool, fn func([]string) error) error {
	if !recursive {
		for _, p := range paths {
			if fi, err := c.Stat(ctx, p); err == nil && fi.IsDir() {
				return fmt.Errorf("%s %s: is a directory (-r acts on every file under it)", what, p)
			}
		}
		return fn(paths)
	}
	var batch []string
	var bytes int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := fn(batch)
		batch, bytes = batch[:0], 0
		return err
	}
	for _, p := range paths {
		err := c.Walk(ctx, p, func(fi *client.FileInfo) error {
			if fi.Type != api.TypeFile || keep != nil && !keep(fi) {
				return nil // symbolic links have no data
			}
			batch, bytes = append(batch, fi.Path), bytes+fi.Size
			if len(batch) >= treeBatchFiles || bytes >= treeBatchBytes {
				return flush()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, p, err)
		}
	}
	return flush()
}

func (e *env) migrateCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "migrate [-r] [PATH...]",
		Short: "Copy files to tape now (all files of tape classes when none are named)",
		Long: `Copy files to tape now and wait until the copies are written, verified and
flushed. Named files get the tape copies their class of service asks for
(at least one); with -r, so does every file under the named directories.
With no names, every file of a class of service with tape copies is
migrated, however recently it was written. The policy does the same on its
own for files older than [hsm] migrate_after.`,
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "every file under the named directories")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		paths, err := remotes(args)
		if err != nil {
			return err
		}
		var res client.HSMResult
		err = e.hsmBatches(ctx, c, "migrate", paths, recursive, nil, c.Migrate, &res)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "migrated %d files, %s, in %d tape files\n", res.Files, human(res.Bytes), res.TapeFiles)
		return e.damaged("migrate", &res, "file(s) left out: their disk copies are damaged")
	})
	return cmd
}

// damaged prints the damage a migration or scrub found, one line each,
// and fails the command if there was any.
func (e *env) damaged(what string, res *client.HSMResult, summary string) error {
	for _, d := range res.Damaged {
		fmt.Fprintf(e.stderr, "strata: %s: %s\n", what, d)
	}
	if n := len(res.Damaged); n > 0 {
		return fmt.Errorf("%s: %d %s", what, n, summary)
	}
	return nil
}

func (e *env) scrubCmd() *cobra.Command {
	var recursive bool
	var volume string
	cmd := &cobra.Command{
		Use:   "scrub [-r] PATH... | scrub --volume VOLUME",
		Short: "Verify copies against their checksums and repair what is damaged (admin)",
		Long: `Read the disk copies of the named files (with -r, of every file under the
named directories) on their movers and check every byte against the
checksums stored with it; with --volume, read every copy on a cartridge on
a drive instead. A damaged copy is dropped and made again from a good one
(a disk copy from a tape copy, a tape copy from the disk copy or another
tape copy); a file with no good copy left is reported lost. Each damaged
copy is named on its own line and the command exits 1. The server also
scrubs disk copies in the background at [integrity] scrub_rate.`,
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "every file under the named directories")
	cmd.Flags().StringVar(&volume, "volume", "", "verify every copy on this cartridge")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		paths, err := remotes(args)
		if err != nil {
			return err
		}
		switch {
		case volume == "" && len(paths) == 0:
			return fmt.Errorf("scrub: name files or directories (with -r), or a cartridge with --volume (see 'strata scrub --help')")
		case volume != "" && len(paths) > 0:
			return fmt.Errorf("scrub: --volume scrubs a whole cartridge; name no paths with it (see 'strata scrub --help')")
		}
		var res client.HSMResult
		if volume != "" {
			r, err := c.ScrubVolume(ctx, volume)
			if err != nil {
				return err
			}
			res = *r
		} else if err := e.hsmBatches(ctx, c, "scrub", paths, recursive, nil, c.Scrub, &res); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "verified %d copies, %s\n", res.Files, human(res.Bytes))
		return e.damaged("scrub", &res, "damaged copies (see above)")
	})
	return cmd
}

// hsmBatches runs op (migrate or purge) over paths, batch by batch with
// recursive, adding up the results in res. With no paths, op runs once with
// none: the policy's own choice.
func (e *env) hsmBatches(ctx context.Context, c *client.Client, what string, paths []string, recursive bool, keep func(*client.FileInfo) bool, op func(context.Context, ...string) (*client.HSMResult, error), res *client.HSMResult) error {
	if len(paths) == 0 {
		r, err := op(ctx)
		if err == nil {
			res.Add(*r)
		}
		return err
	}
	return treeBatchesOf(ctx, c, what, paths, recursive, keep, func(batch []string) error {
		r, err := op(ctx, batch...)
		if err == nil {
			res.Add(*r)
		}
		return err
	})
}

// onDiskAndTape is what purge -r takes from a tree: files whose disk copy
// may go.
func onDiskAndTape(fi *client.FileInfo) bool { return fi.Residency == api.ResidencyBoth }

func (e *env) purgeCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "purge [-r] [PATH...]",
		Short: "Drop disk copies of files that are safe on tape (admin)",
		Long: `Drop the disk copies of the named files, each of which must have a
verified tape copy (the last copy is never dropped); with -r, of every file
under the named directories that has one (the others are left alone). With no names, purge what the disk pools' high- and
low-water marks ask for, least recently used first.`,
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "every file under the named directories")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		paths, err := remotes(args)
		if err != nil {
			return err
		}
		var res client.HSMResult
		if err := e.hsmBatches(ctx, c, "purge", paths, recursive, onDiskAndTape, c.Purge, &res); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "purged %d files, %s\n", res.Files, human(res.Bytes))
		return nil
	})
	return cmd
}

func remotes(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		p, err := remote(a)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (e *env) adminCmd() *cobra.Command {
	var asJSON bool
	var set client.COS
	var unit string
	cmd := &cobra.Command{
		Use:   "admin tapes|drives|queue|pools|cos|lost | admin cos set NAME [flags] | admin drives|tapes online|offline ID | admin library FAULT ARG",
		Short: "Show the tape library, its recall queue, disk pools, classes of service and lost files; edit classes; take drives and cartridges out of service",
		Long: `Show the tape library (tapes, drives), the recall queue, the disk pools,
the classes of service, and the files lost (no good copy left: each with
why, until it is removed or written again). "admin cos set NAME" defines a class or changes the
flags given (--pool, --stripes, --unit, --tape-copies, --tape-only); it is
stored in the catalog, overrides the configuration's class of that name, and
applies to new files at once and to existing files' migration from then on.

"admin drives offline DRIVE" takes a drive out of service (it finishes what
it is doing, then gives its cartridge back); "online" puts it back, once
the library no longer reports it failed. "admin tapes offline VOLUME" takes
a cartridge out of service: it is neither read nor written, and recalls
queued on it go to another copy or fail; "online" puts it back. A drive
that fails under a transfer is taken out of service by the server and put
back the same way. A cartridge a damaged tape file was read from is
read-only (read, not written) until "online" puts it back, and so is one
a write failed on (the tape file goes to another cartridge). What an
admin takes out, and read-only cartridges, stay so across restarts.

"admin library" injects faults into the emulated library, to rehearse:
fail-drive DRIVE, repair-drive DRIVE, unreadable VOLUME, readable VOLUME,
write-errors VOLUME (every write on it fails, its drive working),
writable VOLUME, robot-fail N (the next N robot moves fail; 0 stops it).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 || (len(args) == 3 && (args[0] == "cos" && args[1] == "set" || args[0] == "drives" || args[0] == "tapes" || args[0] == "library")) {
				return nil
			}
			return fmt.Errorf("usage: strata admin tapes|drives|queue|pools|cos|lost, strata admin cos set NAME [flags], strata admin drives|tapes online|offline ID, or strata admin library FAULT ARG")
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	cmd.Flags().StringVar(&set.Pool, "pool", "", "cos set: disk pool")
	cmd.Flags().IntVar(&set.StripeWidth, "stripes", 0, "cos set: stripe width")
	cmd.Flags().StringVar(&unit, "unit", "", "cos set: stripe unit (e.g. 4MiB)")
	cmd.Flags().IntVar(&set.TapeCopies, "tape-copies", 0, "cos set: tape copies (0: disk only)")
	cmd.Flags().BoolVar(&set.TapeOnly, "tape-only", false, "cos set: drop the disk copy once on tape")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		if len(args) == 3 {
			switch args[0] {
			case "drives", "tapes":
				return setService(ctx, c, args[0], args[1], args[2])
			case "library":
				return injectFault(ctx, c, args[1], args[2])
			}
			return e.setCOS(ctx, cmd, c, args[2], set, unit)
		}
		switch args[0] {
		case "pools":
			df, err := c.DF(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, df.Pools)
			}
			fmt.Fprintln(tw, "POOL\tDEVICES\tSIZE\tUSED\tFREE")
			for _, p := range df.Pools {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Name, p.Devices, human(p.Capacity), human(p.Used), human(p.Free))
			}
			return tw.Flush()
		case "cos":
			ks, err := c.ClassesOfService(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, ks)
			}
			fmt.Fprintln(tw, "COS\tLEVELS\tSTRIPES\tUNIT\tDEFAULT")
			for _, k := range ks {
				levels := "disk:" + k.Pool
				switch {
				case k.TapeOnly:
					levels = fmt.Sprintf("tape x%d (disk:%s as buffer)", k.TapeCopies, k.Pool)
				case k.TapeCopies > 0:
					levels += fmt.Sprintf(" -> tape x%d", k.TapeCopies)
				}
				def := ""
				if k.Default {
					def = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", k.Name, levels, k.StripeWidth, human(k.StripeUnit), def)
			}
			return tw.Flush()
		case "lost":
			ls, err := c.LostFiles(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, ls)
			}
			fmt.Fprintln(tw, "PATH\tSINCE\tWHY")
			for _, l := range ls {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Path, l.Since.Local().Format(time.DateTime), l.Why)
			}
			return tw.Flush()
		case "tapes", "drives", "queue":
		default:
			return fmt.Errorf("admin: unknown view %q (want tapes, drives, queue, pools, cos or lost)", args[0])
		}
		lib, err := c.Library(ctx)
		if err != nil {
			return err
		}
		switch args[0] {
		case "tapes":
			if asJSON {
				return writeJSON(e.stdout, lib.Cartridges)
			}
			fmt.Fprintf(e.stdout, "%s library, time scale %s\n", lib.Generation, lib.TimeScale)
			fmt.Fprintln(tw, "VOLUME\tCAPACITY\tUSED\tTAPE FILES\tDRIVE\tSTATE")
			for _, t := range lib.Cartridges {
				state := "ok"
				switch {
				case t.Unreadable:
					state = "unreadable"
				case t.OutOfService != "":
					state = t.OutOfService
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.Volume, human(t.Capacity), human(t.Used), t.TapeFiles, dash(t.Drive), state)
			}
		case "drives":
			if asJSON {
				return writeJSON(e.stdout, lib.Drives)
			}
			fmt.Fprintln(tw, "DRIVE\tSTATE\tVOLUME\tMOUNTS\tLOCATES\tREAD-THROUGHS\tPOSITIONING\tREAD\tWRITTEN\tOUT OF SERVICE")
			for _, d := range lib.Drives {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%.0fs\t%s\t%s\t%s\n", d.ID, d.State, dash(d.Volume), d.Mounts, d.Locates, d.ReadThroughs, d.Positioning, human(d.BytesRead), human(d.BytesWrite), d.OutOfService)
			}
		case "queue":
			if asJSON {
				return writeJSON(e.stdout, lib.Queue)
			}
			fmt.Fprintln(tw, "VOLUME\tFILES\tBYTES\tOLDEST\tPRIORITY\tDRIVE")
			for _, q := range lib.Queue {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", q.Volume, q.Files, human(q.Bytes), lsTime(q.Oldest), q.Priority, dash(q.Drive))
			}
		}
		return tw.Flush()
	})
	return cmd
}

// setService takes a drive or cartridge (what: "drives" or "tapes") out
// of service or puts it back.
func setService(ctx context.Context, c *client.Client, what, state, id string) error {
	var online bool
	switch state {
	case "online":
		online = true
	case "offline":
	default:
		return fmt.Errorf("admin %s: %q is not online or offline", what, state)
	}
	if what == "drives" {
		return c.SetDriveService(ctx, id, online)
	}
	return c.SetCartridgeService(ctx, id, online)
}

// injectFault sets one fault of an emulated library.
func injectFault(ctx context.Context, c *client.Client, fault, arg string) error {
	var f client.LibraryFault
	switch fault {
	case "fail-drive":
		f.FailDrive = arg
	case "repair-drive":
		f.RepairDrive = arg
	case "unreadable":
		f.Unreadable = arg
	case "readable":
		f.Readable = arg
	case "write-errors":
		f.WriteErrors = arg
	case "writable":
		f.Writable = arg
	case "robot-fail":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 {
			return fmt.Errorf("admin library robot-fail: %q is not a count of moves", arg)
		}
		f.RobotFailures = &n
	default:
		return fmt.Errorf("admin library: unknown fault %q (want fail-drive, repair-drive, unreadable, readable, write-errors, writable or robot-fail)", fault)
	}
	return c.InjectFault(ctx, f)
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func (e *env) repackCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repack VOLUME",
		Short: "Move the live files off a cartridge to others, then erase it (admin)",
		Long: `Tape is append-only: files deleted or replaced since they were migrated
still take space on their cartridge. Repack rewrites every live file on
VOLUME to other cartridges (recalling those that are on tape only), forgets
the old copies once the new ones are verified and flushed, and erases
VOLUME for reuse.`,
		Args: exactArgs(1, "repack VOLUME"),
	}
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		res, err := c.Repack(ctx, args[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "repacked %s: moved %d files, %s; the cartridge is empty\n", args[0], res.Files, human(res.Bytes))
		return nil
	})
	return cmd
}

func (e *env) chcosCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chcos NAME PATH...",
		Short: "Set a directory's default class of service (\"\" clears it), or change a file's",
		Long: `A file's class of service is, in order: the one named at put (--cos), the
nearest directory's default (set with mkdir --cos or chcos), the first
[[cos_rule]] its size fits, the server's default_cos. Changing a file's class
decides its tape copies from then on (migration adds what is missing).`,
		Args: minArgs(2, "chcos NAME PATH..."),
	}
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		cos := args[0]
		return eachRemote(args[1:], func(p string) error {
			_, err := c.SetAttr(ctx, client.SetAttr{Path: p, COS: &cos})
			return err
		})
	})
	return cmd
}

// setCOS applies the flags given to class name (new or existing).
func (e *env) setCOS(ctx context.Context, cmd *cobra.Command, c *client.Client, name string, set client.COS, unit string) error {
	ks, err := c.ClassesOfService(ctx)
	if err != nil {
		return err
	}
	k := client.COS{Name: name, StripeWidth: 1, StripeUnit: 4 << 20}
	for _, o := range ks {
		if o.Name == name {
			k = o
		}
	}
	f := cmd.Flags()
	if f.Changed("pool") {
		k.Pool = set.Pool
	}
	if f.Changed("stripes") {
		k.StripeWidth = set.StripeWidth
	}
	if f.Changed("unit") {
		n, err := config.ParseSize(unit)
		if err != nil {
			return err
		}
		k.StripeUnit = n
	}
	if f.Changed("tape-copies") {
		k.TapeCopies = set.TapeCopies
	}
	if f.Changed("tape-only") {
		k.TapeOnly = set.TapeOnly
	}
	if _, err := c.SetCOS(ctx, k); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "cos %s: pool %s, %d stripes of %s, %d tape copies%s\n", k.Name, k.Pool, k.StripeWidth, human(k.StripeUnit), k.TapeCopies,
		map[bool]string{true: ", tape only"}[k.TapeOnly])
	return nil
}
