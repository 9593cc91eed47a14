// Package cli owns the `strata` command line: flag parsing, output
// formatting and progress display. Commands are thin: they parse arguments
// and call the public client package (or, for serve and mover, the server
// package). Every failure prints one line, "strata: <what went wrong>", to
// stderr and exits non-zero.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/pki"
)

type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	server         string
	ca, cert, key  string
	tcpOnly        bool
	noHandover     bool
}

// Main runs the command line and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "strata",
		Short:         "Strata: a hierarchical mass storage system in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       api.Version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	root.PersistentFlags().StringVar(&e.server, "server", "", "server address (default $STRATA_SERVER or "+client.DefaultServer+")")
	root.PersistentFlags().StringVar(&e.ca, "ca", "", "CA certificate to verify the server and movers by over TLS (default $STRATA_CA); with it, a server address without a scheme is https")
	root.PersistentFlags().StringVar(&e.cert, "cert", "", "client certificate for mutual TLS (default $STRATA_CERT)")
	root.PersistentFlags().StringVar(&e.key, "key", "", "its key (default $STRATA_KEY)")
	root.PersistentFlags().BoolVar(&e.tcpOnly, "tcp-only", false, "reach the core and movers over TCP even on their own host (default: their Unix sockets there)")
	root.PersistentFlags().BoolVar(&e.noHandover, "no-handover", false, "stream reads and puts through the sockets of movers on this host (default: pass files and shared write buffers between client and mover)")
	root.AddCommand(e.serveCmd(), e.moverCmd(), e.tapeServerCmd(), e.mkdirCmd(), e.putCmd(), e.getCmd(), e.catCmd(), e.lsCmd(), e.statCmd(),
		e.mvCmd(), e.concatCmd(), e.rmCmd(), e.dfCmd(), e.chmodCmd(), e.stageCmd(), e.migrateCmd(), e.purgeCmd(), e.adminCmd(), e.rebuildCmd(), e.repackCmd(), e.scrubCmd(), e.chcosCmd(), e.benchCmd(), e.simCmd(),
		e.tokenCmd(), e.loginCmd(), e.whoamiCmd(), e.chownCmd(), e.certCmd(), e.auditCmd(), e.quotaCmd(), e.mountCmd(), e.nfsCmd(), e.s3Cmd())
	root.SetArgs(args)
	// Flag errors are usage errors: one line, like every other failure.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (see '%s --help')", c.CommandPath(), err, c.CommandPath())
	})
	// STRATA_CPUPROFILE=FILE writes a CPU profile of the command (where a
	// client's time goes; `strata serve --pprof` is the server's).
	if p := os.Getenv("STRATA_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "strata: %s\n", oneLine(err))
		return 1
	}
	return 0
}

func oneLine(err error) string {
	msg := err.Error()
	if errors.Is(err, context.Canceled) {
		msg = "interrupted"
	}
	if errors.Is(err, client.ErrUnauthenticated) && !strings.Contains(msg, "STRATA_TOKEN") {
		msg += " (set STRATA_TOKEN or run `strata login`)"
	}
	return strings.Join(strings.Fields(msg), " ")
}

func (e *env) client() (*client.Client, error) {
	ca, cert, key := or(e.ca, "STRATA_CA"), or(e.cert, "STRATA_CERT"), or(e.key, "STRATA_KEY")
	c, err := client.New(serverAddr(or(e.server, "STRATA_SERVER"), ca))
	if err != nil {
		return nil, err
	}
	c.SetToken(client.DefaultToken())
	if ca != "" || cert != "" || strings.HasPrefix(c.Server(), "https:") {
		tc, err := pki.ClientConfig(ca, cert, key)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.SetTLS(tc)
	}
	if err == nil && e.tcpOnly {
		c.TCPOnly(true)
	}
	if err == nil && e.noHandover {
		c.Handover(false)
	}
	return c, err
}

// serverAddr is the server address to use: addr as given, or the default
// (empty). A CA means TLS: host:port is then https://host:port, for each
// core of a list (an active one and its standbys), the default address
// too, as `strata serve` says to use --ca on its own host as well.
func serverAddr(addr, ca string) string {
	if ca == "" {
		return addr
	}
	if addr == "" {
		addr = strings.TrimPrefix(client.DefaultServer, "http://")
	}
	as := strings.Split(addr, ",")
	for i, a := range as {
		if a = strings.TrimSpace(a); !strings.Contains(a, "://") && !strings.HasPrefix(a, "unix:") {
			as[i] = "https://" + a
		}
	}
	return strings.Join(as, ",")
}

// withClient adapts a command body that needs a client.
func (e *env) withClient(fn func(ctx context.Context, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := e.client()
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(cmd.Context(), c, args)
	}
}

// exactArgs and rangeArgs give one-line usage errors.
func exactArgs(n int, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("usage: strata %s", usage)
		}
		return nil
	}
}

func minArgs(n int, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return fmt.Errorf("usage: strata %s", usage)
		}
		return nil
	}
}

func rangeArgs(lo, hi int, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return fmt.Errorf("usage: strata %s", usage)
		}
		return nil
	}
}

// or is v, else the environment variable env.
func or(v, env string) string {
	if v != "" {
		return v
	}
	return os.Getenv(env)
}
