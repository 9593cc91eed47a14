package cli

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/nfsfs"
	"github.com/strata-storage/strata/internal/vfs"
)

func (e *env) nfsCmd() *cobra.Command {
	var o nfsfs.Options
	var vo vfs.Options
	var listen string
	var allow []string
	var admin bool
	cmd := &cobra.Command{
		Use:   "nfs [--listen ADDR] [--allow CIDR,...]",
		Short: "Export Strata's namespace over NFSv3 until interrupted",
		Long: `Serve Strata's namespace over NFSv3 (MOUNT and NFS on one port, no
portmapper), so that hosts mount it with their kernel's NFS client:

  mount -t nfs -o vers=3,tcp,port=PORT,mountport=PORT,nolock HOST:/ /mnt

Every client acts as the Strata user who runs the export (all_squash):
run it as the user (or with the token of the user) it serves. --allow
limits which hosts may connect, and only from privileged ports (root on
the client, as the kernel's NFS client connects) unless --insecure. A file written over NFS is stored once
its writes pause for --write-idle. See docs/POSIX.md.`,
		Args: exactArgs(0, "nfs [--listen ADDR] [--allow CIDR,...]"),
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:2049", "address to serve NFS and MOUNT on")
	cmd.Flags().StringSliceVar(&allow, "allow", nil, "client addresses allowed to connect, as CIDRs (default: loopback only)")
	cmd.Flags().BoolVar(&o.Debug, "debug", false, "log every NFS call")
	cmd.Flags().BoolVar(&o.ReadOnly, "read-only", false, "refuse every change")
	cmd.Flags().BoolVar(&o.Insecure, "insecure", false, "accept clients on unprivileged ports (any user of an allowed host)")
	cmd.Flags().BoolVar(&admin, "admin", false, "allow the export to act as an administrator (every client becomes one)")
	cmd.Flags().DurationVar(&o.WriteIdle, "write-idle", 2*time.Second, "store a file once its writes have paused this long")
	cmd.Flags().StringVar(&vo.CacheDir, "cache-dir", "", "directory for write-back files (default: strata-cache under $TMPDIR)")
	cmd.Flags().DurationVar(&vo.RecallTimeout, "recall-timeout", 0, "fail a read waiting for a recall from tape after this long (0: wait)")
	cmd.Flags().StringVar(&vo.COS, "cos", "", "class of service of new files (default: the directory's)")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, _ []string) error {
		for _, a := range allow {
			p, err := netip.ParsePrefix(strings.TrimSpace(a))
			if err != nil {
				return fmt.Errorf("--allow %q: not an address range like 10.1.0.0/16: %w", a, err)
			}
			o.Allow = append(o.Allow, p.Masked())
		}
		who, err := c.WhoAmI(ctx)
		if err != nil {
			return err
		}
		if who.Admin && !admin {
			return fmt.Errorf("%s is an administrator, and every NFS client would act as one: run the export as the user it serves (or with that user's STRATA_TOKEN), or pass --admin", who.User)
		}
		v, err := vfs.New(c, vo)
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		o.Log = e.logger(false)
		x := nfsfs.New(v, o)
		fmt.Fprintf(e.stdout, "nfs: serving on %s as %s (uid %d); mount -t nfs -o vers=3,tcp,port=%d,mountport=%d,nolock HOST:/ MOUNTPOINT\n",
			l.Addr(), who.User, who.UID, l.Addr().(*net.TCPAddr).Port, l.Addr().(*net.TCPAddr).Port)
		served := make(chan error, 1)
		go func() { served <- x.Serve(l) }()
		select {
		case err = <-served:
		case <-ctx.Done():
			l.Close()
			<-served
			err = nil
		}
		if cerr := x.Close(); cerr != nil {
			return fmt.Errorf("nfs: %w", cerr)
		}
		return err
	})
	return cmd
}
