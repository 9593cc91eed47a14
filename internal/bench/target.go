package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Target is what a scenario runs against: a mounted file system or a
// Strata server. Paths are slash-separated and relative to the target's
// root. Every method is safe for concurrent use.
type Target interface {
	// String names the target as given on the command line.
	String() string
	// Describe says what was measured: file system type, durability and
	// cache behaviour.
	Describe(ctx context.Context) TargetInfo
	// Mkdir makes a directory and its missing parents.
	Mkdir(ctx context.Context, p string) error
	// Create starts a file of at most size bytes, written in order,
	// striped over stripes devices where the target stripes (0: its
	// default). Its Close makes the data durable (and, on Strata, visible).
	Create(ctx context.Context, p string, size int64, stripes int) (Writer, error)
	// CreateShared starts one file of size bytes that writers fill in
	// parallel: writer k owns blocks k, k+writers, k+2·writers … of block
	// bytes each (IOR's N-1 layout; segmented when each writer has one
	// block per segment).
	CreateShared(ctx context.Context, p string, size int64, writers int, block int64) (Shared, error)
	// Open opens a file for reading at any offset.
	Open(ctx context.Context, p string) (Reader, error)
	// OpenRW opens an existing file for reading and writing in place. A
	// target whose files are written once returns ErrUnsupported.
	OpenRW(ctx context.Context, p string) (ReadWriter, error)
	// Touch creates a small file in one go, as a metadata benchmark does
	// (mdtest -w): no fsync on a file system; on Strata, a committed file.
	Touch(ctx context.Context, p string, data []byte) error
	Stat(ctx context.Context, p string) error
	// ReadDir lists a directory.
	ReadDir(ctx context.Context, p string) ([]DirEntry, error)
	Remove(ctx context.Context, p string) error
	RemoveAll(ctx context.Context, p string) error
	// DropCache makes the next read of p come from the device, as far as
	// the target can; it says what it did.
	DropCache(ctx context.Context, p string) string
	Close() error
}

// ErrUnsupported marks an operation a target cannot do (in-place writes to
// a write-once store).
var ErrUnsupported = errors.New("not supported by this target")

// Writer writes a file in order.
type Writer interface {
	io.Writer
	// Close makes the file durable; its time counts in the phase.
	Close() error
	// Abort gives up the file.
	Abort()
}

// Shared is a file filled by several writers at once.
type Shared interface {
	// Part returns writer k's stream of its own blocks, in order.
	Part(k int) (Writer, error)
	// Close completes the file after every part is closed.
	Close() error
	Abort()
}

// Reader reads a file at any offset.
type Reader interface {
	io.ReaderAt
	Close() error
}

// ReadWriter reads and writes a file in place.
type ReadWriter interface {
	io.ReaderAt
	io.WriterAt
	// Close makes what was written durable.
	Close() error
}

// DirEntry is one name in a directory.
type DirEntry struct {
	Name  string
	IsDir bool
}

// TargetInfo records what a target is, for the report.
type TargetInfo struct {
	Spec   string `json:"spec"`
	Kind   string `json:"kind"`              // posix or strata
	FSType string `json:"fs_type,omitempty"` // posix: statfs type; strata: the devices' file system
	Path   string `json:"path,omitempty"`    // posix: the directory
	Server string `json:"server,omitempty"`  // strata: server address and version
	Direct bool   `json:"o_direct"`          // data bypasses the client's page cache
	Sink   string `json:"sink,omitempty"`    // reads also written to a file here and fsynced (--sink)
	// Prefault marks reports whose sink files were written into pages
	// staged before the clock (two of docs/sim's validation sets): read,
	// never set — strata bench does not stage them.
	Prefault       bool   `json:"prefault,omitempty"`
	Durability     string `json:"durability"`            // what makes a write durable inside the timed region
	Cache          string `json:"cache_hygiene"`         // what happens between a write and its read
	MetaDurability string `json:"metadata_durability"`   // what a create has made durable when it returns
	Notes          string `json:"notes,omitempty"`       // anything else that changes the numbers
	Devices        int    `json:"devices,omitempty"`     // strata: disk devices in the default pool
	StripeUnit     int64  `json:"stripe_unit,omitempty"` // strata: the default class's stripe unit
	// DeviceBandwidth is the cap every device of that pool has, bytes/s
	// (strata; 0: uncapped, or caps not all alike): a capped device is a
	// token bucket (internal/disk), which a model of the run needs.
	DeviceBandwidth int64 `json:"device_bandwidth,omitempty"`
	// Uncapped says that no device of that pool has a cap (strata): a
	// model may then read as the run did, one request at a time, where on
	// capped devices it must stand in for their buckets' bursts. Absent
	// from reports made before it was recorded.
	Uncapped bool `json:"devices_uncapped,omitempty"`
}

// Options are how targets are opened.
type Options struct {
	Direct bool // posix: O_DIRECT where sizes allow
	// Sink, when set, is a local directory every read is also written
	// to, and fsynced at the reader's Close (see sinkTarget).
	Sink string
}

// OpenTarget opens posix:PATH or strata://HOST:PORT.
func OpenTarget(ctx context.Context, spec string, o Options) (Target, error) {
	var t Target
	var err error
	switch {
	case strings.HasPrefix(spec, "posix:"):
		t, err = openPosix(strings.TrimPrefix(spec, "posix:"), o)
	case strings.HasPrefix(spec, "strata://"), strings.HasPrefix(spec, "strata:"):
		t, err = openStrata(ctx, spec)
	default:
		return nil, fmt.Errorf("target %q: want posix:PATH or strata://HOST:PORT", spec)
	}
	if err != nil || o.Sink == "" {
		return t, err
	}
	if st, err := os.Stat(o.Sink); err != nil || !st.IsDir() {
		t.Close()
		if err == nil {
			err = fmt.Errorf("not a directory")
		}
		return nil, fmt.Errorf("--sink %s: %w", o.Sink, err)
	}
	return &sinkTarget{Target: t, dir: o.Sink}, nil
}
