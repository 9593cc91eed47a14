package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sync/semaphore"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/fsio"
)

// remote normalises a Strata path argument: it must be absolute.
func remote(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%q: Strata paths are absolute (start with /)", p)
	}
	return p, nil
}

// eachRemote checks every argument is a Strata path, then runs fn on each
// in order, stopping at the first failure.
func eachRemote(args []string, fn func(p string) error) error {
	for _, a := range args {
		if _, err := remote(a); err != nil {
			return err
		}
	}
	for _, a := range args {
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) mkdirCmd() *cobra.Command {
	var parents bool
	var mode, cos string
	cmd := &cobra.Command{
		Use:   "mkdir [-p] [--cos NAME] PATH...",
		Short: "Create directories",
		Args:  minArgs(1, "mkdir [-p] PATH..."),
	}
	cmd.Flags().BoolVarP(&parents, "parents", "p", false, "create missing parents; no error if it exists")
	cmd.Flags().StringVarP(&mode, "mode", "m", "", "permission bits in octal (default 0755)")
	cmd.Flags().StringVar(&cos, "cos", "", "default class of service for files created below it")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		m, err := parseMode(mode)
		if err != nil {
			return err
		}
		return eachRemote(args, func(p string) error {
			if _, err := c.Mkdir(ctx, p, parents, m); err != nil {
				return err
			}
			if cos == "" {
				return nil
			}
			_, err := c.SetAttr(ctx, client.SetAttr{Path: p, COS: &cos})
			return err
		})
	})
	return cmd
}

func parseMode(s string) (uint32, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, fmt.Errorf("bad mode %q (want octal, e.g. 0644)", s)
	}
	return uint32(v), nil
}

// defaultParallel is how many files a put of several has in flight: enough
// for the catalog's group commit and the movers' group sync to share their
// fsyncs among many (see putMany).
const defaultParallel = 64

// putBudget bounds the bytes of the files a put has in flight, so that
// large files, each striped over the devices already, go a few at a time
// rather than as many streams as small files would.
const putBudget = 256 << 20

func (e *env) putCmd() *cobra.Command {
	var o client.PutOptions
	var mode string
	var parallel int
	cmd := &cobra.Command{
		Use:   "put [-f] LOCAL... REMOTE",
		Short: "Store local files (striped, parallel, checksummed)",
		Long: `Store local files in Strata. REMOTE is the new file's path, or a directory
(existing, or written with a trailing /) to put the files into. An existing
file is replaced (atomically) only with -f.`,
		Args: minArgs(2, "put [-f] LOCAL... REMOTE"),
	}
	cmd.Flags().BoolVarP(&o.Overwrite, "force", "f", false, "replace an existing file")
	cmd.Flags().StringVar(&o.COS, "cos", "", "class of service (default: the server's default)")
	cmd.Flags().IntVar(&o.Stripes, "stripes", 0, "stripe width (default: the class of service's)")
	cmd.Flags().StringVar(&o.Fixity, "fixity", client.DefaultFixity, "whole-file hash to record: blake3 or sha256")
	cmd.Flags().BoolVar(&o.NoFixity, "no-fixity", false, "record no whole-file hash (CRC32C still protects the data)")
	cmd.Flags().StringVarP(&mode, "mode", "m", "", "permission bits in octal (default 0644)")
	cmd.Flags().IntVarP(&parallel, "parallel", "P", defaultParallel, "files in flight when putting several")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		var err error
		if o.Mode, err = parseMode(mode); err != nil {
			return err
		}
		if o.Stripes < 0 {
			return fmt.Errorf("--stripes must be positive")
		}
		if parallel < 1 {
			return fmt.Errorf("--parallel must be positive")
		}
		locals, dst := args[:len(args)-1], args[len(args)-1]
		if dst, err = remote(dst); err != nil {
			return err
		}
		intoDir := strings.HasSuffix(dst, "/") || len(locals) > 1
		if !intoDir {
			if fi, err := c.Stat(ctx, dst); err == nil && fi.IsDir() {
				intoDir = true
			}
		}
		if !intoDir {
			return e.putFile(ctx, c, locals[0], dst, o, true)
		}
		return e.putMany(ctx, c, locals, dst, parallel, o)
	})
	return cmd
}

// putFile stores one local file at target; with a bar, it shows the
// file's progress.
func (e *env) putFile(ctx context.Context, c *client.Client, local, target string, o client.PutOptions, withBar bool) error {
	// Not os.Open: fsio.OpenFile skips the runtime poller's round of
	// system calls, a quarter of a small file's on the client.
	f, err := fsio.OpenFile(local, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", local)
	}
	bar := &bar{}
	if withBar {
		bar = e.progress("put "+filepath.Base(local), st.Size())
		o.Progress = bar.add
	}
	_, err = c.Put(ctx, target, f, st.Size(), o)
	bar.done(err)
	return err
}

// putMany stores locals into directory dir with up to parallel files in
// flight. A put of one small file is a few round trips and three durable
// writes (the pending bitfile, the object, the commit), each waiting on an
// fsync; many in flight let the catalog's group commit and the movers'
// group sync share those among them, which one-at-a-time puts never do.
// The first failure stops it, as a put of one file after another did: the
// files in flight are abandoned (nothing of them is visible), those stored
// stay, and the error says how many they are.
func (e *env) putMany(ctx context.Context, c *client.Client, locals []string, dir string, parallel int, o client.PutOptions) error {
	// Each file's size, read once: the bar's total and the file's weight
	// in the byte budget (its own open reads it again, authoritatively).
	var total int64
	sizes := make([]int64, len(locals))
	for i, l := range locals {
		if st, err := os.Stat(l); err == nil {
			sizes[i] = st.Size()
			total += st.Size()
		}
	}
	bar := e.progress(fmt.Sprintf("put %d files", len(locals)), total)
	o.Progress = bar.add
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu     sync.Mutex
		first  error
		stored int
		wg     sync.WaitGroup
	)
	// Large files are striped over every device already: a byte budget
	// keeps a put of many of them to a few at a time.
	budget := semaphore.NewWeighted(putBudget)
	next := make(chan int)
	for range max(1, min(parallel, len(locals))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				l, weight := locals[i], min(max(sizes[i], 1), putBudget)
				if budget.Acquire(ctx, weight) != nil {
					continue // cancelled: the error is first's or ctx's
				}
				err := e.putFile(ctx, c, l, path.Join(dir, filepath.Base(l)), o, false)
				budget.Release(weight)
				mu.Lock()
				if err == nil {
					stored++
				} else if first == nil {
					first = fmt.Errorf("put %s: %w", l, err)
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	for i := range locals {
		select {
		case next <- i:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(next)
	wg.Wait()
	err := first
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		err = fmt.Errorf("%w (%d of %d files stored)", err, stored, len(locals))
	}
	bar.done(err)
	return err
}

func (e *env) getCmd() *cobra.Command {
	var force, verify, noWait bool
	cmd := &cobra.Command{
		Use:   "get [-f] REMOTE [LOCAL]",
		Short: "Fetch a file (LOCAL defaults to its name here; - for stdout)",
		Long: `Fetch a file from Strata. The local file appears only when all of it has
arrived and verified: it is written to a temporary name and renamed. An
existing local file is replaced only with -f; a device or a pipe
(/dev/null, a FIFO) is written to.

A file that is on tape only is recalled first: get queues the recall and
waits, reporting the queue position on stderr; with --no-wait it queues the
recall and exits non-zero at once.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return fmt.Errorf("usage: strata get [-f] REMOTE [LOCAL]")
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "replace an existing local file")
	cmd.Flags().BoolVar(&verify, "verify", false, "also recompute the whole-file hash (BLAKE3 or SHA-256, as recorded) and compare it with the recorded fixity")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "for a file on tape: queue its recall and exit instead of waiting")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		src, err := remote(args[0])
		if err != nil {
			return err
		}
		local := path.Base(src)
		if len(args) == 2 {
			local = args[1]
		}
		o := client.GetOptions{VerifyFixity: verify, NoWait: noWait, Staging: e.stagingReport(src)}
		if local == "-" {
			_, err := c.Get(ctx, src, e.stdout, o)
			return err
		}
		if st, err := os.Stat(local); err == nil && st.IsDir() {
			local = filepath.Join(local, path.Base(src))
		}
		if st, err := os.Stat(local); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
			// A device or a pipe (/dev/null, a FIFO, a tape drive): written
			// to, as cp does, never replaced.
			f, err := os.OpenFile(local, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = c.Get(ctx, src, f, o)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}
		if _, err := os.Stat(local); err == nil && !force {
			return fmt.Errorf("%s exists (use -f to replace it)", local)
		}
		tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".strata-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
		fi, err := c.Stat(ctx, src)
		if err != nil {
			tmp.Close()
			return err
		}
		bar := e.progress("get "+path.Base(src), fi.Size)
		o.Progress = bar.add
		_, err = c.Get(ctx, src, tmp, o)
		bar.done(err)
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), os.FileMode(fi.Mode&0o777))
		}
		if err != nil {
			return err
		}
		return os.Rename(tmp.Name(), local)
	})
	return cmd
}

func (e *env) catCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cat PATH...",
		Short: "Write files to stdout",
		Args:  minArgs(1, "cat PATH..."),
	}
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		return eachRemote(args, func(p string) error {
			_, err := c.Get(ctx, p, e.stdout, client.GetOptions{})
			return err
		})
	})
	return cmd
}

func modeString(fi *client.FileInfo) string {
	b := []byte("-rwxrwxrwx")
	switch fi.Type {
	case client.TypeDir:
		b[0] = 'd'
	case client.TypeSymlink:
		b[0] = 'l'
	}
	for i := 0; i < 9; i++ {
		if fi.Mode&(1<<(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	return string(b)
}

func lsTime(t time.Time) string {
	if time.Since(t) > 180*24*time.Hour {
		return t.Format("Jan _2  2006")
	}
	return t.Format("Jan _2 15:04")
}

func (e *env) lsCmd() *cobra.Command {
	var long, dirOnly, asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [-l] [-d] [PATH...]",
		Short: "List directories",
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "long listing: mode, owner, size, time, class of service, residency (disk, tape, disk+tape, staging)")
	cmd.Flags().BoolVarP(&dirOnly, "directory", "d", false, "list directories themselves, not their contents")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		if len(args) == 0 {
			args = []string{"/"}
		}
		// Entries are written a page at a time as they arrive, so a
		// directory of millions lists in bounded memory; long listings
		// align their columns within each page.
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 1, ' ', 0)
		js := &jsonArray{w: e.stdout}
		for i, a := range args {
			p, err := remote(a)
			if err != nil {
				return err
			}
			write := func(ents []client.FileInfo) error {
				if asJSON {
					return js.add(ents)
				}
				for _, fi := range ents {
					lsLine(tw, &fi, long, dirOnly)
				}
				return tw.Flush()
			}
			if !asJSON && len(args) > 1 && !dirOnly {
				if i > 0 {
					fmt.Fprintln(tw)
				}
				fmt.Fprintf(tw, "%s:\n", p)
			}
			if dirOnly {
				fi, serr := c.Stat(ctx, p)
				if serr != nil {
					return serr
				}
				fi.Layout = nil
				err = write([]client.FileInfo{*fi})
			} else {
				err = c.ListPages(ctx, p, 0, write)
			}
			if err != nil {
				return err
			}
		}
		if asJSON {
			return js.close()
		}
		return tw.Flush()
	})
	return cmd
}

// shown is a name as a terminal may print it: quoted, with escapes, when
// it holds control characters or bytes that are not UTF-8 (the server
// refuses such names now; a catalog from before may hold some, and one
// must never rewrite the terminal that lists it).
func shown(name string) string {
	if utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsControl) < 0 {
		return name
	}
	return strconv.Quote(name)
}

// lsLine writes one entry of a listing.
func lsLine(w io.Writer, fi *client.FileInfo, long, dirOnly bool) {
	name := shown(fi.Name)
	if dirOnly {
		name = shown(fi.Path)
	}
	if fi.IsDir() {
		name += "/"
	}
	if fi.Type == client.TypeSymlink && long {
		name += " -> " + shown(fi.Target)
	}
	if !long {
		fmt.Fprintln(w, name)
		return
	}
	cos, res := fi.COS, fi.Residency
	if cos == "" {
		cos = "-"
	}
	if res == "" {
		res = "-"
	}
	fmt.Fprintf(w, "%s\t%d\t%d\t%12d\t%s\t%s\t%s\t%s\n", modeString(fi), fi.UID, fi.GID, fi.Size, lsTime(fi.Mtime), cos, res, name)
}

// jsonArray writes one indented JSON array element by element, as
// writeJSON would have written it whole.
type jsonArray struct {
	w io.Writer
	n int
}

func (a *jsonArray) add(v []client.FileInfo) error {
	for i := range v {
		b, err := json.MarshalIndent(&v[i], "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if a.n == 0 {
			sep = "[\n  "
		}
		a.n++
		if _, err := fmt.Fprintf(a.w, "%s%s", sep, b); err != nil {
			return err
		}
	}
	return nil
}

func (a *jsonArray) close() error {
	if a.n == 0 {
		_, err := io.WriteString(a.w, "[]\n")
		return err
	}
	_, err := io.WriteString(a.w, "\n]\n")
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (e *env) statCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat [--json] PATH...",
		Short: "Show attributes, class of service, layout and checksums",
		Args:  minArgs(1, "stat [--json] PATH..."),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		var out []*client.FileInfo
		err := eachRemote(args, func(p string) error {
			fi, err := c.Stat(ctx, p)
			out = append(out, fi)
			return err
		})
		if err != nil {
			return err
		}
		if asJSON {
			if len(out) == 1 {
				return writeJSON(e.stdout, out[0])
			}
			return writeJSON(e.stdout, out)
		}
		for i, fi := range out {
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			printStat(e.stdout, fi)
		}
		return nil
	})
	return cmd
}

func printStat(w io.Writer, fi *client.FileInfo) {
	const tf = "2006-01-02 15:04:05.000000000 -0700"
	fmt.Fprintf(w, "  Path: %s\n  Type: %s\n  Size: %d (%s)\n", shown(fi.Path), fi.Type, fi.Size, human(fi.Size))
	fmt.Fprintf(w, "  Mode: %s (%04o)   Uid: %d   Gid: %d   Inode: %d\n", modeString(fi), fi.Mode, fi.UID, fi.GID, fi.ID)
	fmt.Fprintf(w, "Modify: %s\nChange: %s\nAccess: %s\n", fi.Mtime.Format(tf), fi.Ctime.Format(tf), fi.Atime.Format(tf))
	if fi.IsDir() {
		return
	}
	fmt.Fprintf(w, "   COS: %s\n", fi.COS)
	if fi.Fixity != "" {
		fmt.Fprintf(w, "Fixity: %s\n", fi.Fixity)
	}
	if fi.Layout == nil {
		fmt.Fprintf(w, "Layout: none (empty file)\n")
		return
	}
	if fi.Residency != "" {
		fmt.Fprintf(w, "Where: %s\n", fi.Residency)
	}
	if fi.Lost != "" {
		fmt.Fprintf(w, "Lost: %s\n", fi.Lost)
	}
	if len(fi.Layout.Segments) > 0 {
		fmt.Fprintf(w, "Layout: %d stripe(s), stripe unit %s\n", fi.Layout.StripeWidth, human(fi.Layout.StripeUnit))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  copy\tstripe\tdevice\tobject\tlength\tcrc32c")
		for _, s := range fi.Layout.Segments {
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%d\t%08x\n", s.Copy, s.Stripe, s.Device, s.Object, s.Length, s.CRC32C)
		}
		tw.Flush()
	}
	if len(fi.Layout.Tapes) > 0 {
		fmt.Fprintln(w, "  Tape:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  copy\tstripe\tvolume\ttape file\toffset\tlength\tcrc32c")
		for _, t := range fi.Layout.Tapes {
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%d\t%d\t%d\t%08x\n", t.Copy, t.Stripe, t.Volume, t.Seq, t.Offset, t.Length, t.CRC32C)
		}
		tw.Flush()
	}
}

func human(n int64) string {
	const u = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(u)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, u[i])
}

func (e *env) mvCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "mv [-f] SRC DST",
		Short: "Rename or move (into DST if it is a directory)",
		Args:  exactArgs(2, "mv [-f] SRC DST"),
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "replace an existing DST")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		src, err := remote(args[0])
		if err != nil {
			return err
		}
		dst, err := remote(args[1])
		if err != nil {
			return err
		}
		if fi, err := c.Stat(ctx, dst); err == nil && fi.IsDir() {
			dst = path.Join(dst, path.Base(src))
		} else if err != nil && !errors.Is(err, client.ErrNotFound) {
			return err
		}
		return c.Rename(ctx, src, dst, force)
	})
	return cmd
}

func (e *env) concatCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "concat [-f] DST SRC...",
		Short: "Join files into DST without copying them (the sources go)",
		Long: `Join the files SRC..., in order, into the new file DST, and remove them.
No data is copied: each source becomes one stripe of DST, so each must be
a file of one stripe on disk without tape copies (strata put --stripes 1),
all of the first one's size but the last, in the pool of DST's class. S3
multipart uploads are completed this way.`,
		Args: minArgs(2, "concat [-f] DST SRC..."),
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "replace an existing DST")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		paths := make([]string, len(args))
		for i, a := range args {
			p, err := remote(a)
			if err != nil {
				return err
			}
			paths[i] = p
		}
		_, err := c.Concat(ctx, paths[0], paths[1:], "", client.PutOptions{Overwrite: force})
		return err
	})
	return cmd
}

func (e *env) rmCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "rm [-r] PATH...",
		Short: "Remove files (and, with -r, directory trees)",
		Args:  minArgs(1, "rm [-r] PATH..."),
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their contents")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		return eachRemote(args, func(p string) error {
			if !recursive {
				if fi, err := c.Stat(ctx, p); err == nil && fi.IsDir() {
					return fmt.Errorf("remove %s: is a directory (use -r)", p)
				}
			}
			return c.Remove(ctx, p, recursive)
		})
	})
	return cmd
}

func (e *env) dfCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "df",
		Short: "Capacity and use per device and pool",
		Args:  exactArgs(0, "df [--json]"),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		df, err := c.DF(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(e.stdout, df)
		}
		pct := func(u, c int64) string {
			if c == 0 {
				return "-"
			}
			return fmt.Sprintf("%d%%", (u*100+c-1)/c)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "DEVICE\tPOOL\tSIZE\tUSED\tFREE\tUSE%\tBANDWIDTH\tSTATE\tMOVER\tFILE SYSTEM\t")
		for _, d := range df.Devices {
			bw, state := "-", "online"
			if d.Bandwidth > 0 {
				bw = fmt.Sprintf("%d MB/s", d.Bandwidth/1e6)
			}
			if !d.Online {
				state = "offline"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d.ID, d.Pool, human(d.Capacity), human(d.Used), human(d.Free), pct(d.Used, d.Capacity), bw, state, d.Mover, dash(d.FS))
		}
		fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t")
		// A pool's file systems are counted once however many of its
		// devices share them; FS USE% is theirs, whoever filled them, and
		// the fuller of USE% and FS USE% drives the purge watermarks.
		fmt.Fprintln(tw, "POOL\tDEVICES\tSIZE\tUSED\tFREE\tUSE%\tFILE SYSTEMS\tFS SIZE\tFS FREE\tFS USE%\t")
		for _, p := range df.Pools {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", p.Name, p.Devices, human(p.Capacity), human(p.Used), human(p.Free), pct(p.Used, p.Capacity),
				p.FileSystems, human(p.FSSize), human(p.FSFree), pct(p.FSSize-p.FSFree, p.FSSize))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(df.Quotas) > 0 {
			fmt.Fprintln(e.stdout)
			return quotaTable(e.stdout, df.Quotas)
		}
		return nil
	})
	return cmd
}

func (e *env) chmodCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chmod MODE PATH...",
		Short: "Change permission bits (octal)",
		Args:  minArgs(2, "chmod MODE PATH..."),
	}
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		m, err := parseMode(args[0])
		if err != nil {
			return err
		}
		return eachRemote(args[1:], func(p string) error {
			_, err := c.SetAttr(ctx, client.SetAttr{Path: p, Mode: &m})
			return err
		})
	})
	return cmd
}
