package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MoverSources are what a standalone mover (`strata mover`) reports, read
// at scrape time. The core sees its devices only as the catalog's
// placements; the mover sees the disks themselves and whether the core
// hears it.
type MoverSources struct {
	// Devices reports each device the mover serves.
	Devices func() []MoverDevice
	// Stats reports files handed to clients on the mover's host and
	// files read from them.
	Stats func() (handed, read, ringed int64)
	// Registration reports whether the last registration with the core
	// succeeded, the core's epoch it learnt, and how many have failed.
	Registration func() (ok bool, epoch, failures int64)
}

// MoverDevice is one device as its mover sees it.
type MoverDevice struct {
	ID, Pool             string
	Capacity, Used, Free int64
}

var (
	mdevLabels     = []string{"device", "pool"}
	mdevCapacity   = prometheus.NewDesc("strata_mover_device_capacity_bytes", "Capacity of a device this mover serves.", mdevLabels, nil)
	mdevUsed       = prometheus.NewDesc("strata_mover_device_used_bytes", "Bytes of objects on a device, as the mover counts them.", mdevLabels, nil)
	mdevFree       = prometheus.NewDesc("strata_mover_device_free_bytes", "Bytes a device can still take (bounded by its file system's free space).", mdevLabels, nil)
	moverUp        = prometheus.NewDesc("strata_mover_registered", "1 if the mover's last registration with the core succeeded, else 0.", nil, nil)
	moverEpoch     = prometheus.NewDesc("strata_mover_core_epoch", "The core's epoch, as last learnt by registering.", nil, nil)
	moverRegFailed = prometheus.NewDesc("strata_mover_registration_failures_total", "Registrations with the core that failed.", nil, nil)
)

type moverState struct{ src MoverSources }

func (s *moverState) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mdevCapacity, mdevUsed, mdevFree, moverHanded, moverRead, moverRinged, moverUp, moverEpoch, moverRegFailed} {
		ch <- d
	}
}

func (s *moverState) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	for _, d := range s.src.Devices() {
		gauge(mdevCapacity, float64(d.Capacity), d.ID, d.Pool)
		gauge(mdevUsed, float64(d.Used), d.ID, d.Pool)
		gauge(mdevFree, float64(d.Free), d.ID, d.Pool)
	}
	handed, read, ringed := s.src.Stats()
	counter(moverHanded, float64(handed))
	counter(moverRead, float64(read))
	counter(moverRinged, float64(ringed))
	ok, epoch, failures := s.src.Registration()
	up := 0.0
	if ok {
		up = 1
	}
	gauge(moverUp, up)
	gauge(moverEpoch, float64(epoch))
	counter(moverRegFailed, float64(failures))
}

// MoverHandler serves a standalone mover's metrics at /metrics, with the
// Go runtime's and the process's.
func MoverHandler(src MoverSources) (http.Handler, prometheus.Gatherer) {
	return processHandler(&moverState{src: src})
}

// processHandler serves c's metrics at /metrics beside the Go runtime's
// and the process's: the /metrics of a process apart from the core (a
// mover, a tape server).
func processHandler(c prometheus.Collector) (http.Handler, prometheus.Gatherer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), c)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return mux, reg
}
