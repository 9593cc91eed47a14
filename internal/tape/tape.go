// Package tape is Strata's tape tier: the Library interface the HSM code
// drives, the LTO timing model, the self-describing tape file format, and an
// emulated library.
//
// The Library interface is at the level of tape files (append a tape file
// at the end of data, read a tape file's header, read a range of its data,
// flush), which a real SCSI library can implement over a media changer and
// st drives (locate to a logical block, read and write blocks, write file
// marks). The emulator is our own: no maintained Go library emulates a tape
// library with timing, and the simulator (strata sim) must reuse the same
// timing model in virtual time, so the model is a set of pure functions of
// state (model.go) and the emulator only adds bytes and waiting.
package tape

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors a library reports. The HSM code tells them apart to retry on
// another drive, use another copy, or give up.
var (
	ErrDriveFailed  = errors.New("tape: drive failed")
	ErrUnreadable   = errors.New("tape: cartridge unreadable")
	ErrRobot        = errors.New("tape: robot did not complete the move")
	ErrFull         = errors.New("tape: cartridge full")
	ErrNotMounted   = errors.New("tape: no cartridge mounted")
	ErrBusy         = errors.New("tape: busy")
	ErrNoSuchFile   = errors.New("tape: no such tape file")
	ErrNoSuchVolume = errors.New("tape: no such cartridge")
	ErrNoSuchDrive  = errors.New("tape: no such drive")
	// ErrWriteFailed is a tape file's write or its closing verification
	// failing on the cartridge, the drive not reported failed: a
	// library's own errors of a tape file being written, as the jobs
	// that write them (tapeserver.Exec) mark them.
	ErrWriteFailed = errors.New("tape: write failed")
)

// Library is a tape library: cartridges in slots, drives, a robot between.
// Drive operations need a cartridge mounted in that drive; a drive runs one
// operation at a time.
type Library interface {
	Generation() Generation
	Cartridges() []CartridgeInfo
	Drives() []DriveInfo
	// Mount moves volume from its slot into drive and loads it.
	Mount(ctx context.Context, drive, volume string) error
	// Dismount rewinds, unloads and returns the drive's cartridge; it also
	// empties a failed drive.
	Dismount(ctx context.Context, drive string) error
	// Append positions at the end of data and starts a tape file with
	// header h (h.Volume, h.Seq and h.Start are filled in). Its data follows through
	// the writer; Close writes the trailer and a (buffered) file mark.
	Append(ctx context.Context, drive string, h *Header) (FileWriter, error)
	// Flush forces everything appended on drive to the medium; tape files
	// closed before a Flush survive a crash, later ones may not.
	Flush(ctx context.Context, drive string) error
	// ReadHeader locates to tape file seq and reads its header.
	ReadHeader(ctx context.Context, drive string, seq int) (*Header, error)
	// ReadTrailer locates to the end of tape file seq and reads its
	// trailer (data length and CRCs).
	ReadTrailer(ctx context.Context, drive string, seq int) (*Trailer, error)
	// ReadData locates to byte off of tape file seq's data and returns a
	// reader of n bytes.
	ReadData(ctx context.Context, drive string, seq int, off, n int64) (io.ReadCloser, error)
	// ReadThrough moves the head forward to byte off of tape file seq's
	// data by reading on through whatever lies between (the rest of the
	// tape file, labels and file marks, the tape files in between),
	// which is quicker than a locate over a short gap. A position behind
	// the head is located to. The recall scheduler decides which to use
	// (tape.Generation.Reach); ReadData then starts where the head is.
	ReadThrough(ctx context.Context, drive string, seq int, off int64) error
	// Erase rewinds the mounted cartridge and makes it empty (relabels
	// it): everything on it is gone. Repack uses it once nothing on the
	// cartridge is referenced.
	Erase(ctx context.Context, drive string) error
	// Stats returns the counters since the library was opened.
	Stats() Stats
}

// FileWriter writes one tape file's data.
type FileWriter interface {
	io.Writer
	// Close ends the tape file. The drive has verified what it wrote
	// (LTO drives read behind the write head) before Close returns.
	Close() error
	// Abort abandons the tape file; the end of data stays before it.
	Abort()
	// Seq is the tape file's number on its volume.
	Seq() int
	// EntryCRCs are the CRC32C of each entry as written, valid after
	// Close.
	EntryCRCs() []uint32
	// Start is where the tape file begins: bytes from the beginning of
	// the tape, the position schedulers order reads by.
	Start() int64
}

// FaultInjector is a library whose faults can be set at will: the
// emulator, so that sites rehearse failures on a running server and tests
// drive the real binary through them.
type FaultInjector interface {
	// FailDrive makes a drive fail every operation (or work again).
	FailDrive(id string, failed bool) error
	// SetUnreadable makes every read of a cartridge fail (or work again).
	SetUnreadable(volume string, bad bool) error
	// SetWriteErrors makes every write on a cartridge fail, its drive
	// working (or the writes work again).
	SetWriteErrors(volume string, bad bool) error
	// FailRobot makes the next n robot moves fail.
	FailRobot(n int)
}

// CartridgeInfo describes one cartridge.
type CartridgeInfo struct {
	Volume     string `json:"volume"`
	Capacity   int64  `json:"capacity"`
	Used       int64  `json:"used"`  // bytes up to the end of data
	Files      int    `json:"files"` // tape files
	Drive      string `json:"drive,omitempty"`
	Unreadable bool   `json:"unreadable,omitempty"`
}

// DriveInfo describes one drive.
type DriveInfo struct {
	ID       string   `json:"id"`
	Volume   string   `json:"volume,omitempty"`
	Position Position `json:"position"`
	Failed   bool     `json:"failed,omitempty"`
	// Lost is a drive whose host (a tape server) does not answer: out of
	// service until it does, without being failed.
	Lost  bool  `json:"lost,omitempty"`
	Busy  bool  `json:"busy,omitempty"`
	Stats Stats `json:"stats"`
}

// Stats counts what a library or drive did and the modelled time it took.
type Stats struct {
	Mounts       int64         `json:"mounts"`
	Dismounts    int64         `json:"dismounts"`
	Locates      int64         `json:"locates"`
	ReadThroughs int64         `json:"read_throughs"` // gaps read through instead of located over
	Flushes      int64         `json:"flushes"`
	Positioning  time.Duration `json:"positioning_ns"` // locates, rewinds, gaps read through
	Mounting     time.Duration `json:"mounting_ns"`    // robot, load, unload
	Transfer     time.Duration `json:"transfer_ns"`    // streaming data
	BytesWritten int64         `json:"bytes_written"`
	BytesRead    int64         `json:"bytes_read"`
}

// Add adds o's counts and times to s.
func (s *Stats) Add(o Stats) {
	s.Mounts += o.Mounts
	s.Dismounts += o.Dismounts
	s.Locates += o.Locates
	s.ReadThroughs += o.ReadThroughs
	s.Flushes += o.Flushes
	s.Positioning += o.Positioning
	s.Mounting += o.Mounting
	s.Transfer += o.Transfer
	s.BytesWritten += o.BytesWritten
	s.BytesRead += o.BytesRead
}
