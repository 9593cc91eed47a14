// Package metrics exposes what a Strata server is doing, in the Prometheus
// text format at /metrics on the control listener: the control API's
// requests (count by route and status, latency by route), the catalog's
// group commits (how many, their duration and size), capacity and use per
// disk device, the embedded mover's hand-overs, the copies found damaged,
// made again and lost, and the tape library (per drive: state, mounts,
// locates, positioning time, bytes; per cartridge: use; per cartridge
// queue: files, bytes, when the oldest request was queued), with the Go
// runtime and process metrics beside them.
//
// State (devices, library) is read from its owner when scraped, not kept
// twice: a scrape costs what `strata df` and `strata library` cost. Only
// the request counts are counted as they happen, by a handler wrapped
// around the API, which reads the matched route from the request (so the
// route label is bounded by the API's own routes; anything else is
// "unmatched").
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-storage/strata/internal/api"
)

// Sources are what a scrape reads. Any may be nil.
type Sources struct {
	// DF reports the devices (as `strata df`).
	DF func(context.Context) (api.DFResponse, error)
	// Library reports the tape library (as `strata library`); an error
	// (no library) leaves its metrics out.
	Library func(context.Context) (api.Library, error)
	// Groups reports the catalog writer's group commits and the
	// operations in them.
	Groups func() (groups, ops int64)
	// Cache reports the catalog's inode cache: entries held, lookups it
	// answered and lookups it passed to the database.
	Cache func() (entries, hits, misses int64)
	// Mover reports the embedded mover's files handed to clients on its
	// host and files it read from them.
	Mover func() (handed, read, ringed int64)
	// Integrity reports the copies found damaged, the repairs and the
	// files lost.
	Integrity func() api.Integrity
}

// Registry holds one server's metrics.
type Registry struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	groupTime prometheus.Histogram
	groupSize prometheus.Histogram
	routes    sync.Map // route -> *route
}

// route caches one route's series, so that a request costs no label
// hashing.
type route struct {
	pattern string
	latency prometheus.Observer
	ok      prometheus.Counter // code 200, most answers
	mu      sync.Mutex
	codes   map[int]prometheus.Counter // the others
}

// New builds the registry over src.
func New(src Sources) *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_api_requests_total",
		Help: "Control API requests answered, by route and HTTP status.",
	}, []string{"route", "code"})
	r.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "strata_api_request_duration_seconds",
		Help: "Control API request latency, by route (a create's includes its durable commit).",
		// 25 µs to ~13 s: a stat is tens of µs, a durable create a few
		// hundred, a recall queued behind a mount minutes (which land in
		// +Inf).
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 20),
	}, []string{"route"})
	r.groupTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "strata_catalog_group_duration_seconds",
		Help: "How long each of the catalog writer's group transactions took, from BEGIN to the end of its durable COMMIT.",
		// 25 µs to ~0.8 s: a group is its fsync (~0.1 ms on SSD) plus
		// ~20 µs per operation; a checkpoint or a busy disk, milliseconds.
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16),
	})
	r.groupSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strata_catalog_group_operations",
		Help:    "Operations each of the catalog writer's group transactions held (one durable sync shared among them).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 … 512, the largest group
	})
	r.reg.MustRegister(r.requests, r.latency, r.groupTime, r.groupSize, cpuCounter(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&state{src: src})
	return r
}

// cpuCounter is the process's CPU time, user and system, to the
// microsecond (getrusage): process_cpu_seconds_total counts in 10 ms
// ticks, too coarse for the CPU an operation of a short benchmark phase
// (strata bench reads this one).
func cpuCounter() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "strata_process_cpu_seconds_total",
		Help: "CPU time the process has used, user and system, in seconds, to the microsecond.",
	}, func() float64 {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
			return 0
		}
		return float64(syscall.TimevalToNsec(ru.Utime)+syscall.TimevalToNsec(ru.Stime)) / 1e9
	})
}

// ObserveGroup records one group transaction of the catalog's writer: how
// many operations it held and how long it took (see
// sqlstore.Store.ObserveGroups).
func (r *Registry) ObserveGroup(ops int, took time.Duration) {
	r.groupTime.Observe(took.Seconds())
	r.groupSize.Observe(float64(ops))
}

// Gatherer gives tests the registry's metrics.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler returns h, every request counted and timed, with the metrics
// served at /metrics beside it. h must be (or wrap) an http.ServeMux,
// which names the route it matched in the request.
func (r *Registry) Handler(h http.Handler) http.Handler {
	metrics := promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, req)
			return
		}
		start := time.Now()
		sw := writers.Get().(*statusWriter)
		sw.ResponseWriter, sw.code = w, 0
		defer func() {
			rt := r.route(req.Pattern)
			rt.latency.Observe(time.Since(start).Seconds())
			rt.count(r.requests, sw.code)
			sw.ResponseWriter = nil
			writers.Put(sw)
		}()
		h.ServeHTTP(sw, req)
	})
}

var writers = sync.Pool{New: func() any { return new(statusWriter) }}

func (r *Registry) route(pattern string) *route {
	if pattern == "" {
		pattern = "unmatched"
	}
	if v, ok := r.routes.Load(pattern); ok {
		return v.(*route)
	}
	v, _ := r.routes.LoadOrStore(pattern, &route{pattern: pattern, latency: r.latency.WithLabelValues(pattern),
		ok: r.requests.WithLabelValues(pattern, "200"), codes: map[int]prometheus.Counter{}})
	return v.(*route)
}

func (rt *route) count(vec *prometheus.CounterVec, code int) {
	if code == 0 || code == http.StatusOK {
		rt.ok.Inc()
		return
	}
	rt.mu.Lock()
	c, ok := rt.codes[code]
	if !ok {
		c = vec.WithLabelValues(rt.pattern, strconv.Itoa(code))
		rt.codes[code] = c
	}
	rt.mu.Unlock()
	c.Inc()
}

// statusWriter remembers the status a handler sent.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) { return w.ResponseWriter.Write(b) }

// Unwrap lets http.ResponseController reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// state collects what the sources report at scrape time.
type state struct{ src Sources }

var (
	devLabels        = []string{"device", "pool", "mover"}
	deviceCapacity   = prometheus.NewDesc("strata_device_capacity_bytes", "Capacity of a disk device.", devLabels, nil)
	deviceUsed       = prometheus.NewDesc("strata_device_used_bytes", "Bytes the catalog has placed on a disk device (committed and reserved).", devLabels, nil)
	deviceOnline     = prometheus.NewDesc("strata_device_online", "1 if the device's mover is registered, else 0.", devLabels, nil)
	catalogGroups    = prometheus.NewDesc("strata_catalog_group_commits_total", "Transactions the catalog's writer committed (each one durable sync).", nil, nil)
	catalogOps       = prometheus.NewDesc("strata_catalog_operations_total", "Namespace changes committed; divided by group commits, the group size.", nil, nil)
	cacheEntries     = prometheus.NewDesc("strata_catalog_cache_entries", "Entries in the catalog's inode cache (capped by [catalog] cache_entries).", nil, nil)
	cacheLookups     = prometheus.NewDesc("strata_catalog_cache_lookups_total", "Lookups of the catalog's inode cache, by result (hit: answered from memory; miss: read from the database).", []string{"result"}, nil)
	moverHanded      = prometheus.NewDesc("strata_mover_files_handed_total", "Reads the mover answered by handing the object's file to a client on its host.", nil, nil)
	moverRead        = prometheus.NewDesc("strata_mover_files_read_total", "Writes for which the mover read the client's own file.", nil, nil)
	moverRinged      = prometheus.NewDesc("strata_mover_ring_writes_total", "Writes whose bytes the mover took from a ring of memory a client on its host shared.", nil, nil)
	driveLabels      = []string{"drive"}
	driveState       = prometheus.NewDesc("strata_tape_drive_state", "1 for a drive's current state (idle, recall, migrate, repack, failed …).", []string{"drive", "state"}, nil)
	driveMounts      = prometheus.NewDesc("strata_tape_drive_mounts_total", "Cartridges mounted in a drive.", driveLabels, nil)
	driveLocates     = prometheus.NewDesc("strata_tape_drive_locates_total", "Positionings (locates) of a drive.", driveLabels, nil)
	driveReadThrough = prometheus.NewDesc("strata_tape_drive_read_throughs_total", "Gaps a drive read through to the next recall instead of locating.", driveLabels, nil)
	drivePositioning = prometheus.NewDesc("strata_tape_drive_positioning_seconds_total", "Time a drive spent positioning (library time).", driveLabels, nil)
	driveRead        = prometheus.NewDesc("strata_tape_drive_read_bytes_total", "Bytes a drive read.", driveLabels, nil)
	driveWritten     = prometheus.NewDesc("strata_tape_drive_written_bytes_total", "Bytes a drive wrote.", driveLabels, nil)
	cartLabels       = []string{"volume"}
	cartCapacity     = prometheus.NewDesc("strata_tape_cartridge_capacity_bytes", "Capacity of a cartridge.", cartLabels, nil)
	cartUsed         = prometheus.NewDesc("strata_tape_cartridge_used_bytes", "Bytes written to a cartridge.", cartLabels, nil)
	queueFiles       = prometheus.NewDesc("strata_recall_queue_files", "Files waiting to be recalled from a cartridge.", cartLabels, nil)
	queueBytes       = prometheus.NewDesc("strata_recall_queue_bytes", "Bytes waiting to be recalled from a cartridge.", cartLabels, nil)
	damagedCopies    = prometheus.NewDesc("strata_damaged_copies_total", "Copies of files found damaged at rest (by readers, migration, recalls), by where the copy was.", []string{"copy"}, nil)
	repairedCopies   = prometheus.NewDesc("strata_repaired_copies_total", "Copies made again from a good copy after one was found damaged.", nil, nil)
	lostFiles        = prometheus.NewDesc("strata_lost_files_total", "Files found with no good copy left.", nil, nil)
	queueOldest      = prometheus.NewDesc("strata_recall_queue_oldest_timestamp_seconds", "When the oldest recall request waiting for a cartridge was queued (Unix time; time() minus it is its age).", cartLabels, nil)
)

func (s *state) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{deviceCapacity, deviceUsed, deviceOnline, catalogGroups, catalogOps, cacheEntries, cacheLookups, moverHanded, moverRead, moverRinged,
		driveState, driveMounts, driveLocates, driveReadThrough, drivePositioning, driveRead, driveWritten, cartCapacity, cartUsed, queueFiles, queueBytes, queueOldest,
		damagedCopies, repairedCopies, lostFiles} {
		ch <- d
	}
}

// scrapeTimeout bounds the reads of one scrape.
const scrapeTimeout = 10 * time.Second

func (s *state) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	if s.src.Groups != nil {
		g, o := s.src.Groups()
		counter(catalogGroups, float64(g))
		counter(catalogOps, float64(o))
	}
	if s.src.Cache != nil {
		n, hits, misses := s.src.Cache()
		gauge(cacheEntries, float64(n))
		counter(cacheLookups, float64(hits), "hit")
		counter(cacheLookups, float64(misses), "miss")
	}
	if s.src.Mover != nil {
		h, r, rg := s.src.Mover()
		counter(moverHanded, float64(h))
		counter(moverRead, float64(r))
		counter(moverRinged, float64(rg))
	}
	if s.src.Integrity != nil {
		in := s.src.Integrity()
		counter(damagedCopies, float64(in.DamagedDisk), "disk")
		counter(damagedCopies, float64(in.DamagedTape), "tape")
		counter(repairedCopies, float64(in.Repaired))
		counter(lostFiles, float64(in.Lost))
	}
	if s.src.DF != nil {
		df, err := s.src.DF(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(deviceCapacity, err)
		}
		for _, d := range df.Devices {
			gauge(deviceCapacity, float64(d.Capacity), d.ID, d.Pool, d.Mover)
			gauge(deviceUsed, float64(d.Used), d.ID, d.Pool, d.Mover)
			online := 0.0
			if d.Online {
				online = 1
			}
			gauge(deviceOnline, online, d.ID, d.Pool, d.Mover)
		}
	}
	if s.src.Library != nil {
		lib, err := s.src.Library(ctx)
		if err != nil {
			return // no library configured
		}
		for _, d := range lib.Drives {
			gauge(driveState, 1, d.ID, d.State)
			counter(driveMounts, float64(d.Mounts), d.ID)
			counter(driveLocates, float64(d.Locates), d.ID)
			counter(driveReadThrough, float64(d.ReadThroughs), d.ID)
			counter(drivePositioning, d.Positioning, d.ID)
			counter(driveRead, float64(d.BytesRead), d.ID)
			counter(driveWritten, float64(d.BytesWrite), d.ID)
		}
		for _, c := range lib.Cartridges {
			gauge(cartCapacity, float64(c.Capacity), c.Volume)
			gauge(cartUsed, float64(c.Used), c.Volume)
		}
		for _, q := range lib.Queue {
			gauge(queueFiles, float64(q.Files), q.Volume)
			gauge(queueBytes, float64(q.Bytes), q.Volume)
			gauge(queueOldest, float64(q.Oldest.UnixNano())/1e9, q.Volume)
		}
	}
}
