package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Env is the machine a run measured from.
type Env struct {
	Host      string `json:"host"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel,omitempty"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	MemBytes  int64  `json:"mem_bytes"`
	GoVersion string `json:"go_version"`
	Tool      string `json:"tool_version"`
	Root      bool   `json:"root"` // can drop caches
}

// CaptureEnv describes this machine.
func CaptureEnv(version string) Env {
	e := Env{OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Tool: version, Root: os.Geteuid() == 0}
	e.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	e.MemBytes = memTotal()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return e
}

// memTotal reads MemTotal from /proc/meminfo (0 when unknown).
func memTotal() int64 { return MemInfo("MemTotal") }

// MemInfo reads one field of /proc/meminfo, in bytes (0 when unknown).
func MemInfo(field string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) >= 2 && fs[0] == field+":" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
