package cli

import (
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/server"
)

func loadConfig(path string, edits ...func(*config.Config)) (config.Config, error) {
	if path == "" {
		if _, err := os.Stat("strata.toml"); err == nil {
			path = "strata.toml"
		}
	}
	return config.Load(path, edits...)
}

func (e *env) logger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
}

// private makes what a server process creates readable by its user only
// (the catalog's WAL, objects, tapes, logs), whatever umask it inherited.
// The sockets and the data directory get their modes explicitly.
func private() { syscall.Umask(0o077) }

func (e *env) serveCmd() *cobra.Command {
	var cfgPath, dataDir, listen, pprofAddr string
	var verbose, insecure, standby bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Strata server: catalog, core and a mover with its devices",
		Long: `Run a single-node Strata server. With no configuration it keeps everything
under ./strata-data (SQLite catalog, four disk devices), serves the control API
on 127.0.0.1:7420 and data on 127.0.0.1:7421. A strata.toml in the current
directory, or --config, overrides any of it.

With a PostgreSQL catalog and --standby (catalog standby = true), a server
that finds another one active waits, opening no port, and takes over when
that one stops or loses the database; an active server with standbys stops
itself when it cannot confirm its hold on the catalog for 3 s. Clients and
movers name every core (STRATA_SERVER=a:7420,b:7420). See docs/DEPLOYMENT.md.`,
		Args: exactArgs(0, "serve [--config FILE]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cfgPath, func(c *config.Config) {
				if dataDir != "" {
					c.DataDir = dataDir
				}
				if listen != "" {
					c.Listen = listen
				}
				if insecure {
					c.TLS.Insecure = true
				}
				if standby {
					c.Catalog.Standby = true
				}
			})
			if err != nil {
				return err
			}
			private()
			s, err := server.Start(cmd.Context(), cfg, e.logger(verbose))
			if err != nil {
				return err
			}
			if pprofAddr != "" {
				// net/http/pprof registers on the default mux, which
				// nothing else in Strata serves.
				go http.ListenAndServe(pprofAddr, nil)
			}
			fmt.Fprintf(e.stderr, "strata: serving on %s (data in %s); stop with Ctrl-C\n", s.URL(), cfg.DataDir)
			if strings.HasPrefix(s.URL(), "https:") {
				fmt.Fprintf(e.stderr, "strata: TLS: clients trust %s (--ca or STRATA_CA)\n", s.CA())
			}
			select {
			case <-cmd.Context().Done():
				return s.Close()
			case err := <-s.Lost():
				// Stop now: a standby is taking over. A clean close
				// may wait on a database that cannot be reached;
				// what it does not finish in a few seconds, exiting
				// ends (nothing it holds is needed to be consistent).
				closed := make(chan struct{})
				go func() { s.Close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(5 * time.Second):
				}
				return err
			}
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "TOML configuration file (default ./strata.toml if present)")
	cmd.Flags().StringVar(&dataDir, "data", "", "data directory (overrides data_dir)")
	cmd.Flags().StringVar(&listen, "listen", "", "control API address (overrides listen)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve Go profiling endpoints (net/http/pprof) on this address")
	cmd.Flags().BoolVar(&standby, "standby", false, "with a PostgreSQL catalog another server holds, wait and take over when it stops (catalog standby)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow plain TCP on addresses other than loopback (tokens and data in the clear)")
	return cmd
}

func (e *env) moverCmd() *cobra.Command {
	var cfgPath, core, metricsAddr string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "mover",
		Short: "Run a standalone mover that serves its devices for a remote core",
		Long: `Run a data mover on its own, for multi-host deployments. It serves the
devices in its configuration and registers with the core (--core or [mover]
core) every 5 seconds. It needs the core's secret file (secret_file).
With --metrics (or [mover] metrics) it serves Prometheus metrics there:
its devices, its transfers and whether the core hears it.`,
		Args: exactArgs(0, "mover --config FILE [--core URL]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cfgPath, func(c *config.Config) {
				if core != "" {
					c.Mover.Core = core
				}
				if metricsAddr != "" {
					c.Mover.Metrics = metricsAddr
				}
			})
			if err != nil {
				return err
			}
			private()
			return server.RunMover(cmd.Context(), cfg, e.logger(verbose))
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "TOML configuration file")
	cmd.Flags().StringVar(&core, "core", "", "URL of the core to register with (a comma-separated list: the core and its standbys)")
	cmd.Flags().StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	return cmd
}

func (e *env) tapeServerCmd() *cobra.Command {
	var cfgPath, core, metricsAddr string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "tape-server",
		Short: "Run a tape server: drives of the library on this host, for a remote core",
		Long: `Run a tape server: the [tape_server] drives of the library configured in
[library] (its path holds the cartridges, shared with the other tape
servers), registering with the core (--core or [tape_server] core) every 5
seconds. The core, with [library] remote = true, keeps the robot and the
schedule and sends each migration and recall to the drive's tape server,
which moves the data straight between the movers and its drive. It needs
the core's secret file (secret_file). See docs/DEPLOYMENT.md.`,
		Args: exactArgs(0, "tape-server --config FILE [--core URL]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cfgPath, func(c *config.Config) {
				if core != "" {
					c.TapeServer.Core = core
				}
				if metricsAddr != "" {
					c.TapeServer.Metrics = metricsAddr
				}
			})
			if err != nil {
				return err
			}
			private()
			return server.RunTapeServer(cmd.Context(), cfg, e.logger(verbose))
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "TOML configuration file")
	cmd.Flags().StringVar(&core, "core", "", "URL of the core to register with (a comma-separated list: the core and its standbys)")
	cmd.Flags().StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	return cmd
}

func (e *env) rebuildCmd() *cobra.Command {
	var cfgPath, dataDir string
	cmd := &cobra.Command{
		Use:   "rebuild-catalog NEW.db | postgres://URL",
		Short: "Rebuild a catalog of every file on tape from the cartridges alone (server stopped)",
		Long: `Read the self-describing tape files on every cartridge of the configured
library and write a new catalog with the namespace they hold: directories,
files with their attributes and fixity, and their tape copies (the files are
on tape only). The server must be stopped.

The new catalog is a SQLite file (NEW.db, which must not exist) or, given a
postgres:// or postgresql:// URL, a PostgreSQL schema: the one the URL's
search_path names, e.g. postgres://strata@dbhost/strata?search_path=rebuilt,
which must be empty or missing. To use it, point [catalog] path (or driver
and dsn) at it. Files deleted since they were migrated come back: tape does
not record deletions.`,
		Args: exactArgs(1, "rebuild-catalog [--config FILE] NEW.db | postgres://URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cfgPath, func(c *config.Config) {
				if dataDir != "" {
					c.DataDir = dataDir
				}
			})
			if err != nil {
				return err
			}
			res, err := server.RebuildCatalog(cmd.Context(), cfg, args[0], e.logger(false))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "rebuilt %s: %d files (%d tape copies) from %d tape files on %d cartridges\n", server.Redacted(args[0]), res.Files, res.Copies, res.TapeFiles, res.Cartridges)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "TOML configuration file (default ./strata.toml if present)")
	cmd.Flags().StringVar(&dataDir, "data", "", "data directory (overrides data_dir)")
	return cmd
}
