package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/fusefs"
	"github.com/strata-storage/strata/internal/vfs"
)

func (e *env) mountCmd() *cobra.Command {
	var fo fusefs.Options
	var vo vfs.Options
	cmd := &cobra.Command{
		Use:   "mount [--allow-other] [--cache-dir DIR] MOUNTPOINT",
		Short: "Mount Strata's namespace as a local file system (FUSE) until interrupted or unmounted",
		Long: `Mount Strata's namespace at MOUNTPOINT through the kernel's FUSE, as the
user who runs it (see docs/POSIX.md). It runs in the foreground until
Ctrl-C, SIGTERM, or 'fusermount3 -u MOUNTPOINT' / 'umount MOUNTPOINT'.
Files written in order stream to the movers; others go through a
write-back file in --cache-dir. Opening a file on tape waits for its
recall (O_NONBLOCK: EAGAIN).`,
		Args: exactArgs(1, "mount [--allow-other] [--cache-dir DIR] MOUNTPOINT"),
	}
	cmd.Flags().BoolVar(&fo.AllowOther, "allow-other", false, "serve every local user, each as themselves (a gateway: run it as root or an admin; FUSE allow_other)")
	cmd.Flags().BoolVar(&fo.NoRootSquash, "no-root-squash", false, "with --allow-other: let the host's root act as root (default: as nobody)")
	cmd.Flags().DurationVar(&fo.AttrTimeout, "attr-timeout", time.Second, "how long the kernel caches names and attributes (the staleness of other clients' changes)")
	cmd.Flags().BoolVar(&fo.Debug, "debug", false, "log every FUSE request")
	cmd.Flags().StringVar(&vo.CacheDir, "cache-dir", "", "directory for write-back files (default: strata-cache under $TMPDIR)")
	cmd.Flags().DurationVar(&vo.RecallTimeout, "recall-timeout", 0, "fail an open waiting for a recall from tape after this long with ETIMEDOUT (0: wait)")
	cmd.Flags().StringVar(&vo.COS, "cos", "", "class of service of new files (default: the directory's)")
	var pprofAddr string
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve Go profiling endpoints (net/http/pprof) on this address")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		// Fail now, not at the first ls, if the server is out of reach
		// or will not have us.
		who, err := c.WhoAmI(ctx)
		if err != nil {
			return err
		}
		if fo.AllowOther && !who.Admin {
			return fmt.Errorf("--allow-other makes the mount act for every local user, which the server allows only an administrator (%s is not)", who.User)
		}
		if pprofAddr != "" {
			go http.ListenAndServe(pprofAddr, nil) // net/http/pprof's, on the default mux (see serve)
		}
		v, err := vfs.New(c, vo)
		if err != nil {
			return err
		}
		srv, err := fusefs.Mount(args[0], v, fo)
		if err != nil {
			return fmt.Errorf("mount %s: %w", args[0], err)
		}
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done: // unmounted from outside
		case <-ctx.Done():
			if err := srv.Unmount(); err != nil {
				return fmt.Errorf("unmount %s: %w (files may be open; try 'fusermount3 -u -z %s')", args[0], err, args[0])
			}
			<-done
		}
		return nil
	})
	return cmd
}
