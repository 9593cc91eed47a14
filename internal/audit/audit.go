// Package audit owns the audit log: one JSON line for every request that
// changed something and for every request refused (401, 403), with who
// made it, how they were authenticated, from where, what they asked for
// and what came of it. The log is a file in the data directory (0600),
// rotated by size; `strata audit` reads it back.
//
// Records are written by one goroutine, which takes whatever requests have
// queued meanwhile and writes them as whole lines in one write(2): a
// request pays a channel send, not a system call under a lock (measured:
// writing each line in the request's path cost creates a quarter of their
// rate). The queue holds 4096 records; when it is full, requests wait for
// it (nothing is dropped). A crash loses the lines not yet written, and
// there is no fsync per line: the catalog is the durable record of what
// changed, this the record of who asked. Lines are encoded with
// github.com/goccy/go-json, the control API's codec: on two cores the
// writer's CPU is the requests' CPU.
package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	json "github.com/goccy/go-json"
)

// Record is one line of the log.
type Record struct {
	Time   time.Time `json:"time"`
	User   string    `json:"user,omitempty"` // empty: not authenticated
	UID    *uint32   `json:"uid,omitempty"`
	Auth   string    `json:"auth,omitempty"` // peercred, token, x509
	Token  string    `json:"token,omitempty"`
	Remote string    `json:"remote,omitempty"` // "unix" for the socket
	Op     string    `json:"op"`               // "POST /v1/create"
	Paths  []string  `json:"paths,omitempty"`
	Status int       `json:"status"`
	Error  string    `json:"error,omitempty"`
	Bytes  int64     `json:"bytes,omitempty"`
}

// Log appends records to a file, rotating it when it grows past MaxSize:
// path becomes path.1, path.1 path.2, and so on up to Keep old files.
type Log struct {
	path    string
	maxSize int64
	keep    int
	q       chan Record
	done    chan struct{}
	onError func(error)

	mu   sync.Mutex // the file, for Close against the writer
	f    *os.File
	size int64
}

// Open opens (creating, mode 0600) the log at path; onError, if set,
// hears of failed writes (the requests they describe were served).
func Open(path string, maxSize int64, keep int, onError func(error)) (*Log, error) {
	if maxSize <= 0 {
		maxSize = 100 << 20
	}
	if keep <= 0 {
		keep = 5
	}
	if onError == nil {
		onError = func(error) {}
	}
	l := &Log{path: path, maxSize: maxSize, keep: keep, q: make(chan Record, 4096), done: make(chan struct{}), onError: onError}
	if err := l.open(); err != nil {
		return nil, err
	}
	go l.writer()
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %w", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write queues r for the log.
func (l *Log) Write(r Record) { l.q <- r }

// writer writes queued records, as many per write(2) as have queued.
func (l *Log) writer() {
	defer close(l.done)
	var buf []byte
	for r := range l.q {
		buf = l.line(buf[:0], r)
	more:
		for int64(len(buf)) < min(1<<20, l.maxSize/2) {
			select {
			case r, ok := <-l.q:
				if !ok {
					break more
				}
				buf = l.line(buf, r)
			default:
				break more
			}
		}
		if err := l.write(buf); err != nil {
			l.onError(err)
		}
	}
}

func (l *Log) line(buf []byte, r Record) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		l.onError(err)
		return buf
	}
	return append(append(buf, b...), '\n')
}

func (l *Log) write(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("audit: log closed")
	}
	if l.size+int64(len(b)) > l.maxSize && l.size > 0 {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	return err
}

// rotate shifts the old files up by one and starts a new log.
func (l *Log) rotate() error {
	l.f.Close()
	l.f = nil
	os.Remove(l.path + "." + strconv.Itoa(l.keep))
	for i := l.keep - 1; i >= 1; i-- {
		os.Rename(l.path+"."+strconv.Itoa(i), l.path+"."+strconv.Itoa(i+1))
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit: rotate: %w", err)
	}
	return l.open()
}

// Close writes what is queued and closes the log. No Write may follow.
func (l *Log) Close() error {
	close(l.q)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Files returns the log's files, oldest first: path.N … path.1, path.
func Files(path string) []string {
	var out []string
	for i := 99; i >= 1; i-- {
		p := path + "." + strconv.Itoa(i)
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	if _, err := os.Stat(path); err == nil {
		out = append(out, path)
	}
	return out
}

// Filter selects records.
type Filter struct {
	User   string // a name, or a uid (a user the host does not name is "uid:N")
	Since  time.Time
	Denied bool // 401 and 403 only
}

func (f Filter) match(r Record) bool {
	return f.user(r) && !r.Time.Before(f.Since) && (!f.Denied || r.Status == 401 || r.Status == 403)
}

func (f Filter) user(r Record) bool {
	if f.User == "" || r.User == f.User {
		return true
	}
	return r.UID != nil && (f.User == strconv.FormatUint(uint64(*r.UID), 10) || f.User == "uid:"+strconv.FormatUint(uint64(*r.UID), 10))
}

// Read calls fn for every record of the log at path (all its files,
// oldest first) that f selects. A line that does not parse (a crash cut it
// short) is skipped.
func Read(path string, f Filter, fn func(Record, []byte) error) error {
	files := Files(path)
	if len(files) == 0 {
		return fmt.Errorf("audit: no log at %s", path)
	}
	for _, p := range files {
		if err := readFile(p, f, fn); err != nil {
			return err
		}
	}
	return nil
}

func readFile(p string, f Filter, fn func(Record, []byte) error) error {
	fh, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var r Record
			if json.Unmarshal(line, &r) == nil && f.match(r) {
				if err := fn(r, line); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: %s: %w", filepath.Base(p), err)
		}
	}
}
