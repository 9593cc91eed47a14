package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/metrics"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/pki"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
)

// RunTapeServer runs a tape server until ctx ends: its drives of the
// library in cfg.Library (shared cartridges, the core's robot), an HTTP
// API the core calls to move cartridges' data straight to and from
// movers, and a registration with the core every few seconds.
func RunTapeServer(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	ts, l := cfg.TapeServer, cfg.Library
	if ts.Core == "" {
		return errors.New("tape server: no core to register with (set [tape_server] core or --core)")
	}
	if ts.ID == "" || ts.Drives < 1 {
		return errors.New("tape server: [tape_server] id and drives (at least 1) are required")
	}
	secret, err := LoadSecret(cfg.SecretFile, false)
	if err != nil {
		return fmt.Errorf("tape server: %w (copy the core's secret file)", err)
	}
	tlsc, err := setupTLS(cfg, []string{ts.Listen}, false)
	if err != nil {
		return fmt.Errorf("tape server: %w", err)
	}
	gen, err := tape.LookupGeneration(l.Generation)
	if err != nil {
		return fmt.Errorf("config: library: %w", err)
	}
	clk, err := clock.Parse(l.TimeScale)
	if err != nil {
		return fmt.Errorf("config: library: %w", err)
	}
	var ids []string
	for i := 0; i < ts.Drives; i++ {
		ids = append(ids, fmt.Sprintf("%s-drive%d", ts.ID, i))
	}
	lib, err := tape.OpenEmulator(l.Path, tape.Options{Generation: gen, DriveIDs: ids, Cartridges: l.Cartridges, Capacity: int64(l.Capacity),
		Clock: clk, Log: log, Shared: true})
	if err != nil {
		return fmt.Errorf("tape server: %w", err)
	}
	pool := moverconn.NewPool()
	pool.TLS = tlsc.trust
	defer pool.Close()
	ln, err := listenTCP(ts.Listen)
	if err != nil {
		return fmt.Errorf("tape server: %w", err)
	}
	scheme := "http"
	if tlsc.server != nil {
		ln, scheme = pki.NewListener(ln, tlsc.server), "https"
	}
	url := ts.Advertise
	if url == "" {
		url = scheme + "://" + listenAddr(ts.Listen, ln)
	}
	srv := &http.Server{Handler: tapeserver.NewServer(lib, pool, secret, log).Handler(), ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 20}
	go srv.Serve(ln)
	defer srv.Close()
	log.Info("tape server", "id", ts.ID, "url", url, "drives", len(ids), "library", l.Path)
	hc := registrationClient(tlsc.trust)
	var registered atomic.Bool
	var lastEpoch, failures atomic.Int64
	if ts.Metrics != "" {
		h, _ := metrics.TapeServerHandler(metrics.TapeServerSources{Drives: lib.Drives,
			Registration: func() (bool, int64, int64) { return registered.Load(), lastEpoch.Load(), failures.Load() }})
		stop, err := serveMetrics(ts.Metrics, "tape server", h, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	keepRegistered(ctx, "tape server", ts.Core, log, func(ctx context.Context, coreURL string) (int64, error) {
		reg := tapeserver.Registration{ID: ts.ID, URL: url, Generation: gen.Name, Drives: lib.Drives(), Cartridges: lib.Cartridges()}
		reg.Proof = tapeserver.Proof(secret, reg)
		return register(ctx, hc, coreURL+"/v1/tapeservers/register", reg)
	}, func(first bool, epoch int64, coreURL string) {
		if first {
			log.Info("tape server registered", "core", coreURL, "url", url, "epoch", epoch)
		}
		lastEpoch.Store(epoch)
	}, &registered, &failures)
	return nil
}
