package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Point is one sweep point: the values set and the run's result.
type Point struct {
	Set    map[string]string `json:"set"`
	Result *Result           `json:"result,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// SweepResult is a whole sweep, points in order.
type SweepResult struct {
	Name   string   `json:"name"`
	Keys   []string `json:"keys"`
	Seed   uint64   `json:"seed"`
	Points []Point  `json:"points"`
	// WallSeconds is how long the sweep took here.
	WallSeconds float64 `json:"wall_seconds"`
}

// Study is a loaded config with its source, so sweep points can be made
// by changing the source and parsing it again (every point then passes the
// same checks as a hand-written file).
type Study struct {
	*Config
	src []byte
}

// LoadStudy reads a study file.
func LoadStudy(path string) (*Study, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("sim: %s: %w", path, err)
	}
	c.dir = filepath.Dir(path)
	return &Study{Config: c, src: b}, nil
}

// ParseStudy reads a study from TOML text.
func ParseStudy(b []byte) (*Study, error) {
	c, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return &Study{Config: c, src: b}, nil
}

// SweepKeys are the swept parameters, sorted (never map order).
func (s *Study) SweepKeys() []string {
	var ks []string
	for k := range s.Sweep {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Points lists the cross product of the sweep's values: the last key
// varies fastest.
func (s *Study) Points() []map[string]string {
	keys := s.SweepKeys()
	pts := []map[string]string{{}}
	for _, k := range keys {
		var next []map[string]string
		for _, p := range pts {
			for _, v := range s.Sweep[k] {
				q := map[string]string{}
				for kk, vv := range p {
					q[kk] = vv
				}
				q[k] = v
				next = append(next, q)
			}
		}
		pts = next
	}
	return pts
}

// Override returns the study with the dotted keys set (as With does) and
// those keys taken out of the sweep: `--set workload.op=read` on a study
// that sweeps the operation runs only the reads.
func (s *Study) Override(set map[string]string) (*Study, error) {
	if len(set) == 0 {
		return s, nil
	}
	doc, err := s.apply(set)
	if err != nil {
		return nil, err
	}
	if sw, ok := doc["sweep"].(map[string]any); ok {
		for k := range set {
			delete(sw, k)
		}
	}
	b, err := toml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("--set: %w", err)
	}
	c.dir = s.dir
	return &Study{Config: c, src: b}, nil
}

// With returns the study with the dotted keys set to values (a value that
// reads as a TOML number or boolean is one; anything else is a string).
func (s *Study) With(set map[string]string) (*Config, error) {
	doc, err := s.apply(set)
	if err != nil {
		return nil, err
	}
	delete(doc, "sweep")
	b, err := toml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("sweep point %s: %w", pointName(sortedKeys(set), set), err)
	}
	c.dir = s.dir
	return c, nil
}

func sortedKeys(set map[string]string) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// apply sets dotted keys in the study's TOML document, in key order.
func (s *Study) apply(set map[string]string) (map[string]any, error) {
	var doc map[string]any
	if err := toml.Unmarshal(s.src, &doc); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts := strings.Split(k, ".")
		m := doc
		for i := 0; i < len(parts)-1; i++ {
			p := parts[i]
			if arr, ok := m[p].([]any); ok {
				// an array of tables ([[clients.group]]): the next part
				// names the element
				if i++; i == len(parts)-1 {
					return nil, fmt.Errorf("%s: name one of the %s by its name (%s.NAME.KEY)", k, p, strings.Join(parts[:i], "."))
				}
				sub := named(arr, parts[i])
				if sub == nil {
					return nil, fmt.Errorf("%s: no %s is named %q", k, p, parts[i])
				}
				m = sub
				continue
			}
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = literal(set[k])
	}
	return doc, nil
}

// named is the table of arr whose name is name, or nil.
func named(arr []any, name string) map[string]any {
	for _, e := range arr {
		if t, ok := e.(map[string]any); ok && t["name"] == name {
			return t
		}
	}
	return nil
}

func literal(v string) any {
	var x struct{ V any }
	if err := toml.Unmarshal([]byte("V = "+v), &x); err == nil {
		switch x.V.(type) {
		case int64, float64, bool:
			return x.V
		}
	}
	return v
}

func pointName(keys []string, set map[string]string) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+set[k])
	}
	return strings.Join(parts, " ")
}

// RunSweep runs every point, up to workers at once (0: one per CPU), each in
// its own simulator with the same seed; progress, if set, is called after
// each point with (done, total). The result lists points in sweep order
// whatever order they finished in.
func (s *Study) RunSweep(seed uint64, workers int, progress func(done, total int)) *SweepResult {
	pts := s.Points()
	out := &SweepResult{Name: s.Name, Keys: s.SweepKeys(), Seed: seed, Points: make([]Point, len(pts))}
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	start := time.Now()
	var mu sync.Mutex
	done := 0
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := Point{Set: pts[i]}
				c, err := s.With(pts[i])
				if err == nil {
					t0 := time.Now()
					p.Result, err = Run(c, seed)
					if p.Result != nil {
						p.Result.WallSeconds = round3(time.Since(t0).Seconds())
					}
				}
				if err != nil {
					p.Error = err.Error()
				}
				out.Points[i] = p
				mu.Lock()
				done++
				if progress != nil {
					progress(done, len(pts))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range pts {
		work <- i
	}
	close(work)
	wg.Wait()
	out.WallSeconds = round3(time.Since(start).Seconds())
	return out
}

// Failed counts points that did not run.
func (r *SweepResult) Failed() int {
	n := 0
	for _, p := range r.Points {
		if p.Error != "" {
			n++
		}
	}
	return n
}
