package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-storage/strata/internal/tape"
)

// TapeServerSources are what a tape server (`strata tape-server`)
// reports, read at scrape time: its drives as it drives them, and whether
// the core hears it. The core's /metrics shows every drive of the library
// as the core sees it (strata_tape_drive_*); a tape server's own shows
// what the core cannot when the server is cut off from it.
type TapeServerSources struct {
	Drives func() []tape.DriveInfo
	// Registration reports whether the last registration with the core
	// succeeded, the core's epoch it learnt, and how many have failed.
	Registration func() (ok bool, epoch, failures int64)
}

var (
	tsDrive        = []string{"drive"}
	tsDriveFailed  = prometheus.NewDesc("strata_tapeserver_drive_failed", "1 if the drive reports itself failed, else 0.", tsDrive, nil)
	tsDriveBusy    = prometheus.NewDesc("strata_tapeserver_drive_busy", "1 while the drive is moving data or positioning, else 0.", tsDrive, nil)
	tsDriveLoaded  = prometheus.NewDesc("strata_tapeserver_drive_loaded", "1 for the cartridge a drive holds.", []string{"drive", "volume"}, nil)
	tsDriveMounts  = prometheus.NewDesc("strata_tapeserver_drive_mounts_total", "Cartridges mounted in the drive.", tsDrive, nil)
	tsDriveRead    = prometheus.NewDesc("strata_tapeserver_drive_read_bytes_total", "Bytes the drive read.", tsDrive, nil)
	tsDriveWritten = prometheus.NewDesc("strata_tapeserver_drive_written_bytes_total", "Bytes the drive wrote.", tsDrive, nil)
	tsDrivePos     = prometheus.NewDesc("strata_tapeserver_drive_positioning_seconds_total", "Time the drive spent positioning (library time).", tsDrive, nil)
	tsUp           = prometheus.NewDesc("strata_tapeserver_registered", "1 if the tape server's last registration with the core succeeded, else 0.", nil, nil)
	tsEpoch        = prometheus.NewDesc("strata_tapeserver_core_epoch", "The core's epoch, as last learnt by registering.", nil, nil)
	tsRegFailed    = prometheus.NewDesc("strata_tapeserver_registration_failures_total", "Registrations with the core that failed.", nil, nil)
)

type tapeServerState struct{ src TapeServerSources }

func (s *tapeServerState) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tsDriveFailed, tsDriveBusy, tsDriveLoaded, tsDriveMounts, tsDriveRead, tsDriveWritten, tsDrivePos, tsUp, tsEpoch, tsRegFailed} {
		ch <- d
	}
}

func (s *tapeServerState) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	one := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, d := range s.src.Drives() {
		gauge(tsDriveFailed, one(d.Failed), d.ID)
		gauge(tsDriveBusy, one(d.Busy), d.ID)
		if d.Volume != "" {
			gauge(tsDriveLoaded, 1, d.ID, d.Volume)
		}
		counter(tsDriveMounts, float64(d.Stats.Mounts), d.ID)
		counter(tsDriveRead, float64(d.Stats.BytesRead), d.ID)
		counter(tsDriveWritten, float64(d.Stats.BytesWritten), d.ID)
		counter(tsDrivePos, d.Stats.Positioning.Seconds(), d.ID)
	}
	ok, epoch, failures := s.src.Registration()
	gauge(tsUp, one(ok))
	gauge(tsEpoch, float64(epoch))
	counter(tsRegFailed, float64(failures))
}

// TapeServerHandler serves a tape server's metrics at /metrics, with the
// Go runtime's and the process's.
func TapeServerHandler(src TapeServerSources) (http.Handler, prometheus.Gatherer) {
	return processHandler(&tapeServerState{src: src})
}
