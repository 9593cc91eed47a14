package main_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads the server's /metrics as an operator's Prometheus would.
func (s *server) scrape() map[string]*dto.MetricFamily {
	s.t.Helper()
	return scrape(s.t, "http://"+s.addr+"/metrics")
}

// scrape reads the metrics at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	return fams
}

// sum adds the values of a family's series whose labels include match.
func sum(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	total := 0.0
	f := fams[name]
	if f == nil {
		return -1
	}
series:
	for _, m := range f.Metric {
		for k, v := range match {
			found := false
			for _, l := range m.Label {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// What an operator's Prometheus scrapes from a running server follows what
// users did: requests by route and status, the bytes on the disks, the
// catalog's commits, the drives' mounts and the tape written.
func TestMetrics(t *testing.T) {
	s := newServer(t, "[library]\ntime_scale = \"instant\"\ndrives = 2\ncartridges = 4\n")
	before := s.scrape()
	if sum(before, "strata_tape_drive_state", map[string]string{"state": "idle"}) != 2 {
		t.Fatalf("two idle drives expected at start")
	}
	sizes := 0
	for i, n := range []int{1 << 20, 3<<20 + 7} {
		local := filepath.Join(s.dir, fmt.Sprintf("m%d", i))
		writeRandom(t, local, n)
		s.ok("put", local, fmt.Sprintf("/m%d", i))
		sizes += n
	}
	s.run("stat", "/missing")
	s.ok("migrate")
	if resp, err := http.Get("http://" + s.addr + "/no/such/route"); err == nil {
		resp.Body.Close()
	}

	m := s.scrape()
	for _, c := range []struct {
		name  string
		match map[string]string
		min   float64
	}{
		{"strata_api_requests_total", map[string]string{"route": "POST /v1/creates", "code": "200"}, 2}, // puts batch their creates and commits
		{"strata_api_requests_total", map[string]string{"route": "POST /v1/commits", "code": "200"}, 2},
		{"strata_api_requests_total", map[string]string{"route": "GET /v1/stat", "code": "404"}, 1},
		{"strata_api_requests_total", map[string]string{"route": "POST /v1/migrate", "code": "200"}, 1},
		{"strata_api_requests_total", map[string]string{"route": "unmatched", "code": "401"}, 1}, // over TCP without a token
		{"strata_api_request_duration_seconds", map[string]string{"route": "POST /v1/creates"}, 2},
		{"strata_catalog_group_commits_total", nil, 1},
		{"strata_catalog_operations_total", nil, 4},
		{"strata_catalog_group_duration_seconds", nil, 1},
		{"strata_catalog_group_operations", nil, 1},
		{"strata_tape_drive_mounts_total", nil, 1},
		{"strata_tape_drive_written_bytes_total", nil, float64(sizes)},
		{"strata_tape_cartridge_used_bytes", nil, float64(sizes)},
		{"strata_device_online", nil, 4},
		{"go_goroutines", nil, 1},
	} {
		if got := sum(m, c.name, c.match); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.match, got, c.min)
		}
	}
	// The disks hold exactly the two files (the migration copies, the
	// disk copies stay until purged).
	if got := sum(m, "strata_device_used_bytes", nil); got != float64(sizes) {
		t.Errorf("device used bytes sum to %v, want %d", got, sizes)
	}
	if got := sum(m, "strata_tape_drive_state", nil); got != 2 {
		t.Errorf("drive states sum to %v: each drive must be in exactly one state", got)
	}
}
