// Package api owns the control-plane vocabulary shared by the core and the
// public client: the JSON request and response bodies, the layouts handed to
// clients, and the error codes that travel over HTTP and the data plane.
// The client package re-exports these types; keeping them here lets the core
// use them without importing the client.
package api

import (
	"errors"
	"fmt"
	"time"
)

// Version is the protocol and release version reported by /v1/version.
const Version = "0.1.0"

// ListNextHeader, on a /v1/list reply, says more entries follow and holds
// (query-escaped) the name to pass as after for the next page.
const ListNextHeader = "Strata-Next"

// Error codes. Each maps to one sentinel below and one HTTP status.
const (
	CodeNotFound = "not_found"
	CodeExist    = "exists"
	CodeNotDir   = "not_dir"
	CodeIsDir    = "is_dir"
	CodeNotEmpty = "not_empty"
	CodeInvalid  = "invalid"
	CodeNoSpace  = "no_space"
	CodeCorrupt  = "corrupt"
	CodeDenied   = "denied"
	CodeInternal = "internal"
	CodeOffline  = "offline"
	// CodeUnauthenticated: no credentials, or ones the server does not
	// accept (HTTP 401); CodeDenied is an established caller refused (403).
	CodeUnauthenticated = "unauthenticated"
	CodeQuota           = "quota"
	CodeNameTooLong     = "name_too_long"
	CodeNoAttr          = "no_attr"
	CodeNotOwner        = "not_owner"
	CodeUnavailable     = "unavailable"
	CodeRestarted       = "restarted"
)

// Sentinel errors; errors.Is works on every error the client returns.
var (
	ErrNotFound = errors.New("no such file or directory")
	ErrExist    = errors.New("file exists")
	ErrNotDir   = errors.New("not a directory")
	ErrIsDir    = errors.New("is a directory")
	ErrNotEmpty = errors.New("directory not empty")
	ErrInvalid  = errors.New("invalid argument")
	ErrNoSpace  = errors.New("no space left on device")
	ErrCorrupt  = errors.New("data corruption detected")
	ErrDenied   = errors.New("permission denied")
	ErrInternal = errors.New("internal server error")
	ErrOffline  = errors.New("file is on tape only")
	// ErrUnauthenticated: the server could not tell who is calling.
	ErrUnauthenticated = errors.New("not authenticated")
	// ErrQuota: the file would take its owner or group past a quota.
	ErrQuota = errors.New("quota exceeded")
	// ErrNameTooLong: a name or path beyond NAME_MAX or PATH_MAX. It is
	// also ErrInvalid (errors.Is), for callers that do not tell them
	// apart.
	ErrNameTooLong = fmt.Errorf("file name too long: %w", ErrInvalid)
	// ErrNoAttr: an extended attribute that is not set (ENODATA). It is
	// also ErrNotFound.
	ErrNoAttr = fmt.Errorf("no such attribute: %w", ErrNotFound)
	// ErrNotOwner: what only an entry's owner (or an admin) may do —
	// chmod, chown, setting times — asked by someone else (EPERM, where
	// a permission bit that is missing is EACCES). It is also ErrDenied.
	ErrNotOwner = fmt.Errorf("operation not permitted: %w", ErrDenied)
	// ErrUnavailable: what the request needs is out of service (every
	// tape drive failed or taken offline); the same request may succeed
	// once it is back.
	ErrUnavailable = errors.New("unavailable")
	// ErrRestarted: a write begun under a core that has since stopped (a
	// standby took over, or it restarted) cannot be finished; its space
	// is reclaimed, and the write may begin again. It is also
	// ErrUnavailable.
	ErrRestarted = fmt.Errorf("the core restarted since the write began: %w", ErrUnavailable)
)

var codes = []struct {
	code   string
	err    error
	status int
}{
	{CodeNoAttr, ErrNoAttr, 404}, // before ErrNotFound, which it wraps
	{CodeNotFound, ErrNotFound, 404},
	{CodeExist, ErrExist, 409},
	{CodeNotDir, ErrNotDir, 409},
	{CodeIsDir, ErrIsDir, 409},
	{CodeNotEmpty, ErrNotEmpty, 409},
	{CodeNameTooLong, ErrNameTooLong, 400}, // before ErrInvalid, which it wraps
	{CodeInvalid, ErrInvalid, 400},
	{CodeNoSpace, ErrNoSpace, 507},
	{CodeCorrupt, ErrCorrupt, 500},
	{CodeNotOwner, ErrNotOwner, 403}, // before ErrDenied, which it wraps
	{CodeDenied, ErrDenied, 403},
	{CodeInternal, ErrInternal, 500},
	{CodeOffline, ErrOffline, 409},
	{CodeUnauthenticated, ErrUnauthenticated, 401},
	{CodeQuota, ErrQuota, 507},
	{CodeRestarted, ErrRestarted, 503}, // before ErrUnavailable, which it wraps
	{CodeUnavailable, ErrUnavailable, 503},
}

// CodeOf returns the code and HTTP status for err.
func CodeOf(err error) (string, int) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, c.status
		}
	}
	return CodeInternal, 500
}

// Error is an error carrying a code and a message from the peer.
type Error struct {
	Code string `json:"code"`
	Msg  string `json:"error"`
}

func (e *Error) Error() string { return e.Msg }

// Unwrap maps the code back to its sentinel.
func (e *Error) Unwrap() error {
	for _, c := range codes {
		if c.code == e.Code {
			return c.err
		}
	}
	return ErrInternal
}

// Errorf wraps a sentinel with a message: Errorf(ErrNotFound, "stat %s", p)
// reads "stat /a: no such file or directory".
func Errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sentinel)...)
}

// File types.
const (
	TypeDir     = "dir"
	TypeFile    = "file"
	TypeSymlink = "symlink"
)

// Segment is one stripe of one copy of a file's data on one device.
type Segment struct {
	Copy   int    `json:"copy"`
	Stripe int    `json:"stripe"`
	Device string `json:"device"`
	Object string `json:"object"`
	Length int64  `json:"length"`
	CRC32C uint32 `json:"crc32c"`
}

// Layout is how a file's data is laid out: round-robin stripe units over
// StripeWidth segments.
type Layout struct {
	StripeWidth int        `json:"stripe_width"`
	StripeUnit  int64      `json:"stripe_unit"`
	Segments    []Segment  `json:"segments"` // the disk copy; none when purged
	Tapes       []TapeCopy `json:"tapes,omitempty"`
}

// FileInfo describes a namespace entry.
type FileInfo struct {
	Path   string    `json:"path"`
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	ID     int64     `json:"id"`
	Mode   uint32    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Size   int64     `json:"size"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	Atime  time.Time `json:"atime"`
	COS    string    `json:"cos,omitempty"`
	Layout *Layout   `json:"layout,omitempty"`
	Fixity string    `json:"fixity,omitempty"` // "blake3:<hex>" or "sha256:<hex>" of the whole file
	// Residency says where a file's data lives: disk, tape, disk+tape,
	// staging (on tape, a recall queued or running), or lost (no good copy
	// left).
	Residency string `json:"residency,omitempty"`
	// Target is a symbolic link's: the path it points at, as given.
	Target string `json:"target,omitempty"`
	// PinnedUntil is when the disk copy's pin ends (Stat), if pinned.
	PinnedUntil *time.Time `json:"pinned_until,omitempty"`
	// Lost says why a file with residency lost has no good copy left
	// (Stat).
	Lost string `json:"lost,omitempty"`
}

// LostFile is a file with no good copy left (GET /v1/lost).
type LostFile struct {
	Path  string    `json:"path"`
	Why   string    `json:"why"`
	Since time.Time `json:"since"`
}

// Residency values.
const (
	ResidencyDisk    = "disk"
	ResidencyTape    = "tape"
	ResidencyBoth    = "disk+tape"
	ResidencyStaging = "staging"
	ResidencyLost    = "lost"
)

// TapeCopy is one copy of a file on tape.
type TapeCopy struct {
	Copy   int    `json:"copy"`
	Stripe int    `json:"stripe,omitempty"`
	Volume string `json:"volume"`
	Seq    int    `json:"seq"` // tape file
	// Position is where the tape file starts, bytes from the beginning of
	// the tape: what the recall scheduler orders reads by.
	Position int64  `json:"position"`
	Offset   int64  `json:"offset"` // in the tape file's data
	Length   int64  `json:"length"`
	CRC32C   uint32 `json:"crc32c"`
}

// StageRequest queues recalls of files that are on tape only.
type StageRequest struct {
	Paths    []string `json:"paths"`
	Priority int      `json:"priority,omitempty"`
	// Pin keeps each file's disk copy from the purge policy for this
	// many seconds from now (an S3 restore's Days, a Tape REST stage's
	// diskLifetime); a longer pin already held is kept.
	Pin float64 `json:"pin_seconds,omitempty"`
}

// ReleaseRequest drops the pins of files' disk copies (the purge policy
// may take them again).
type ReleaseRequest struct {
	Paths []string `json:"paths"`
}

// Stage states.
const (
	StageResident = "resident" // on disk: nothing to do
	StageQueued   = "queued"   // waiting for a drive
	StageActive   = "staging"  // its cartridge is being read
	StageFailed   = "failed"
	StageOffline  = "offline" // on tape, no recall queued
)

// StageStatus is one file's recall.
type StageStatus struct {
	Path     string  `json:"path"`
	State    string  `json:"state"`
	Volume   string  `json:"volume,omitempty"`
	Position int     `json:"position,omitempty"` // requests ahead in the queue
	ETA      float64 `json:"eta_seconds,omitempty"`
	Error    string  `json:"error,omitempty"`
	// Waiting says why a queued recall cannot go on now (no usable
	// drive); it then has no ETA.
	Waiting string `json:"waiting,omitempty"`
	// PinnedUntil is when the disk copy's pin ends, if it has one.
	PinnedUntil *time.Time `json:"pinned_until,omitempty"`
}

// StageResponse reports each file's recall.
type StageResponse struct {
	Files []StageStatus `json:"files"`
}

// Batch carries several calls of one kind in one request (POST
// /v1/creates, /v1/commits): what a client's many transfers ask at once.
// The core makes them together and answers each on its own.
type Batch[T any] struct {
	Items []T `json:"items"`
}

// BatchReply answers a Batch item by item, in order: each a value or an
// error.
type BatchReply[T any] struct {
	Results []BatchResult[T] `json:"results"`
}

// BatchResult is one call's answer in a BatchReply.
type BatchResult[T any] struct {
	Value *T     `json:"value,omitempty"`
	Error *Error `json:"error,omitempty"`
}

// MaxBatch bounds the calls of one Batch.
const MaxBatch = 1024

// MigrateRequest copies files to tape now: the named ones, or (none named)
// every file of a tape class of service, however young.
type MigrateRequest struct {
	Paths []string `json:"paths,omitempty"`
}

// PurgeRequest drops disk copies now: of the named files (each must have a
// tape copy), or (none named) as the pools' watermarks require.
type PurgeRequest struct {
	Paths []string `json:"paths,omitempty"`
}

// RepackRequest moves every live copy off a cartridge, then erases it.
type RepackRequest struct {
	Volume string `json:"volume"`
}

// HSMResult counts what a migration, purge or repack did.
type HSMResult struct {
	Files     int   `json:"files"`
	Bytes     int64 `json:"bytes"`
	TapeFiles int   `json:"tape_files,omitempty"`
	// Damaged are the copies found damaged (by migration: the files left
	// out), each "path: what was done about it".
	Damaged []string `json:"damaged,omitempty"`
}

// Add adds o's counts to r.
func (r *HSMResult) Add(o HSMResult) {
	r.Files += o.Files
	r.Bytes += o.Bytes
	r.TapeFiles += o.TapeFiles
	r.Damaged = append(r.Damaged, o.Damaged...)
}

// Cartridge is one tape cartridge as admin commands show it.
type Cartridge struct {
	Volume     string `json:"volume"`
	Capacity   int64  `json:"capacity"`
	Used       int64  `json:"used"`
	TapeFiles  int    `json:"tape_files"`
	Drive      string `json:"drive,omitempty"`
	Unreadable bool   `json:"unreadable,omitempty"`
	// OutOfService says why the cartridge is not used ("offline
	// (admin)"); "" when it is in service.
	OutOfService string `json:"out_of_service,omitempty"`
}

// Drive is one tape drive as admin commands show it.
type Drive struct {
	ID     string `json:"id"`
	Volume string `json:"volume,omitempty"`
	State  string `json:"state"` // idle, recall, migrate, failed, offline
	// OutOfService says why a failed or offline drive is out of service.
	OutOfService string `json:"out_of_service,omitempty"`
	Mounts       int64  `json:"mounts"`
	Locates      int64  `json:"locates"`
	// ReadThroughs are the gaps the drive read through instead of
	// locating (sched.Request.ReadThrough).
	ReadThroughs int64   `json:"read_throughs"`
	Positioning  float64 `json:"positioning_seconds"`
	BytesRead    int64   `json:"bytes_read"`
	BytesWrite   int64   `json:"bytes_written"`
}

// QueueEntry is one cartridge's recall queue.
type QueueEntry struct {
	Volume   string    `json:"volume"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	Oldest   time.Time `json:"oldest"`
	Priority int       `json:"priority,omitempty"`
	Drive    string    `json:"drive,omitempty"`
}

// Library is the tape library's state.
type Library struct {
	Generation string       `json:"generation"`
	TimeScale  string       `json:"time_scale"`
	Cartridges []Cartridge  `json:"cartridges"`
	Drives     []Drive      `json:"drives"`
	Queue      []QueueEntry `json:"queue"`
}

// IsDir reports whether fi is a directory.
func (fi *FileInfo) IsDir() bool { return fi.Type == TypeDir }

// MkdirRequest creates a directory.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
	COS     string `json:"cos,omitempty"` // default class of service below it
	Mode    uint32 `json:"mode,omitempty"`
}

// XattrRequest sets (or removes) one extended attribute of Path. How is
// "create" (fail if set), "replace" (fail if not) or "" (either).
type XattrRequest struct {
	Path  string `json:"path"`
	Name  string `json:"name"`
	Value []byte `json:"value,omitempty"`
	How   string `json:"how,omitempty"`
}

// XattrList is an entry's extended attributes.
type XattrList struct {
	Attrs map[string][]byte `json:"attrs,omitempty"`
}

// OnBehalfOf is the request header with which a gateway an administrator
// runs (strata mount --allow-other) acts for one of its callers:
// "UID:GID[:G1,G2,...]". The core refuses it from anyone else.
const OnBehalfOf = "Strata-On-Behalf-Of"

// SymlinkRequest creates the symbolic link Path pointing at Target.
type SymlinkRequest struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// CreateRequest asks for a layout to write a new file of Size bytes. A
// Size of 0 creates and commits an empty file at once.
type CreateRequest struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	COS     string `json:"cos,omitempty"`
	Stripes int    `json:"stripes,omitempty"` // overrides the class of service
	// StripeUnit overrides the class's stripe unit: a writer that fills a
	// shared file block by block asks for its block size.
	StripeUnit int64 `json:"stripe_unit,omitempty"`
	Overwrite  bool  `json:"overwrite,omitempty"` // replace an existing file atomically
	// Rewrite writes into an existing file as write(2) does: it needs
	// write permission on the file rather than on its directory, and the
	// new version keeps the file's owner, group, mode and class (the
	// set-ID bits cleared for a writer other than the owner). A file that
	// does not exist is created.
	Rewrite bool   `json:"rewrite,omitempty"`
	Mode    uint32 `json:"mode,omitempty"`
	// Xattrs, when not nil, become the file's user.* attributes in the
	// same transaction that makes it visible (an S3 object's metadata
	// and ETag): those it had are dropped. Only an empty file, committed
	// at create, takes them from here; others from CommitRequest.
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
}

// StripeTarget tells a client where to send or fetch one stripe.
type StripeTarget struct {
	Stripe int    `json:"stripe"`
	Device string `json:"device"`
	Mover  string `json:"mover"` // host:port of the mover's data listener
	// Socket is the mover's Unix socket, for clients on the mover's own
	// host (Host, its boot id): there the data path skips the TCP stack.
	Socket string `json:"socket,omitempty"`
	Host   string `json:"host,omitempty"`
	// TLS says the mover's TCP port speaks TLS (verified against the
	// client's CA, for the address in Mover).
	TLS    bool   `json:"tls,omitempty"`
	Object string `json:"object"`
	Length int64  `json:"length"` // write: bytes reserved; read: bytes stored
	CRC32C uint32 `json:"crc32c,omitempty"`
	Token  string `json:"token"`
}

// CreateResponse is the write layout, or the committed file when Size was 0.
type CreateResponse struct {
	Bitfile int64 `json:"bitfile,omitempty"`
	// Epoch is the core's: a commit names it, so that a core that took
	// over can tell a write it never began from one that ended.
	Epoch      int64          `json:"epoch,omitempty"`
	StripeUnit int64          `json:"stripe_unit,omitempty"`
	Stripes    []StripeTarget `json:"stripes,omitempty"`
	File       *FileInfo      `json:"file,omitempty"`
}

// SegmentReceipt is a mover's signed statement that a stripe is durable.
type SegmentReceipt struct {
	Stripe  int    `json:"stripe"`
	Length  int64  `json:"length"`
	CRC32C  uint32 `json:"crc32c"`
	Receipt string `json:"receipt"`
}

// CommitRequest makes a written file visible.
type CommitRequest struct {
	Bitfile   int64            `json:"bitfile"`
	Epoch     int64            `json:"epoch,omitempty"` // CreateResponse.Epoch
	Path      string           `json:"path"`
	Size      int64            `json:"size"`
	Segments  []SegmentReceipt `json:"segments"`
	Fixity    string           `json:"fixity,omitempty"`
	COS       string           `json:"cos,omitempty"`
	Overwrite bool             `json:"overwrite,omitempty"`
	Rewrite   bool             `json:"rewrite,omitempty"` // as in CreateRequest
	Mode      uint32           `json:"mode,omitempty"`
	// Xattrs as in CreateRequest.
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
}

// ConcatRequest makes Path the files Sources joined in order and removes
// them, without copying their data: each source must be a file of one
// stripe on disk without tape copies, all as long as the first but the
// last (1 byte to as long). The joined file has a stripe per source.
type ConcatRequest struct {
	Path      string            `json:"path"`
	Sources   []string          `json:"sources"`
	COS       string            `json:"cos,omitempty"`
	Overwrite bool              `json:"overwrite,omitempty"`
	Mode      uint32            `json:"mode,omitempty"`
	Xattrs    map[string][]byte `json:"xattrs,omitempty"` // as in CreateRequest
	// Fixity is the joined file's whole-file digest, if the caller could
	// make it without reading the data (client.TreeHash); "" for none.
	Fixity string `json:"fixity,omitempty"`
}

// AbortRequest abandons a pending write.
type AbortRequest struct {
	Bitfile int64 `json:"bitfile"`
}

// OpenResponse is the read layout of a file.
type OpenResponse struct {
	File       FileInfo       `json:"file"`
	StripeUnit int64          `json:"stripe_unit"`
	Stripes    []StripeTarget `json:"stripes"`
}

// ServiceChange takes a drive or a cartridge out of service or puts it
// back (admin).
type ServiceChange struct {
	Drive  string `json:"drive,omitempty"`
	Volume string `json:"volume,omitempty"`
	Online bool   `json:"online"`
}

// LibraryFault injects faults into an emulated tape library, so that a
// site can rehearse and tests can drive the real binary (admin). Each
// field set is applied.
type LibraryFault struct {
	FailDrive   string `json:"fail_drive,omitempty"`   // the drive fails every operation
	RepairDrive string `json:"repair_drive,omitempty"` // and works again
	Unreadable  string `json:"unreadable,omitempty"`   // every read of the cartridge fails
	Readable    string `json:"readable,omitempty"`     // and works again
	WriteErrors string `json:"write_errors,omitempty"` // every write on the cartridge fails, its drive working
	Writable    string `json:"writable,omitempty"`     // and writes work again
	// RobotFailures makes the next n robot moves fail (0: none).
	RobotFailures *int `json:"robot_failures,omitempty"`
}

// DamageReport tells the core that a stripe of a file's disk copy failed
// its check at rest: the mover, asked to verify what it read, found the
// object damaged. The core verifies it again itself before acting.
type DamageReport struct {
	Path   string `json:"path"`
	Device string `json:"device"`
	Object string `json:"object"`
}

// UnreachableReport tells the core that a client could not connect to
// the mover of a device it was given to write to. The core tries itself
// and, if it cannot connect either, takes the mover out of placement until
// it registers again, so that a put begun again goes elsewhere.
type UnreachableReport struct {
	Device string `json:"device"`
}

// UnreachableReply says whether the core could connect to the mover.
type UnreachableReply struct {
	Reachable bool `json:"reachable"`
}

// What the core found and did about a DamageReport.
const (
	// DamageGood: the copy verified whole (the damage was in transit):
	// read it again.
	DamageGood = "good"
	// DamageStale: the object is no longer the file's copy (the file was
	// replaced, or repaired already): open it again.
	DamageStale = "stale"
	// DamageRecalling: the damaged disk copy was dropped and the file is
	// being recalled from a good tape copy: open it again, which waits.
	DamageRecalling = "recalling"
)

// DamageReply answers a DamageReport. A file with no good copy left is
// not a reply but an ErrCorrupt error saying it is lost.
type DamageReply struct {
	State string `json:"state"`
}

// ScrubRequest asks the core to verify copies against their checksums and
// repair what it can: the disk copies of the files named, or every copy on
// one cartridge (read on a drive, as a recall reads). The answer is an
// HSMResult: the copies verified (Files: a striped tape copy counts each
// stripe on the cartridge), their bytes, and the damage found.
type ScrubRequest struct {
	Paths  []string `json:"paths,omitempty"`
	Volume string   `json:"volume,omitempty"`
}

// Integrity counts what the server's checks of stored data found and
// repaired since it started.
type Integrity struct {
	DamagedDisk int64 `json:"damaged_disk"` // disk copies found damaged
	DamagedTape int64 `json:"damaged_tape"` // tape copies found damaged
	Repaired    int64 `json:"repaired"`     // copies re-made from a good one
	Lost        int64 `json:"lost"`         // files found with no good copy left
}

// RenameRequest moves Src to Dst.
type RenameRequest struct {
	Src       string `json:"src"`
	Dst       string `json:"dst"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// RemoveRequest removes a file or (with Recursive, or when empty) a directory.
type RemoveRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// SetAttrRequest changes attributes; nil fields are left alone.
type SetAttrRequest struct {
	Path  string     `json:"path"`
	Mode  *uint32    `json:"mode,omitempty"`
	UID   *uint32    `json:"uid,omitempty"`
	GID   *uint32    `json:"gid,omitempty"`
	Mtime *time.Time `json:"mtime,omitempty"`
	Atime *time.Time `json:"atime,omitempty"`
	// Now sets both times to the server's clock (utimensat's UTIME_NOW,
	// touch): allowed to the owner and to anyone who may write the file,
	// where explicit times are the owner's alone.
	Now bool `json:"now,omitempty"`
	// COS sets a directory's default class of service ("" clears it), or
	// changes a file's (which decides its tape copies from then on).
	COS *string `json:"cos,omitempty"`
}

// DeviceInfo is one device's capacity and use.
type DeviceInfo struct {
	ID        string `json:"id"`
	Pool      string `json:"pool"`
	Mover     string `json:"mover"`
	Online    bool   `json:"online"`
	Capacity  int64  `json:"capacity"`
	Used      int64  `json:"used"`
	Free      int64  `json:"free"`
	Bandwidth int64  `json:"bandwidth,omitempty"` // bytes/s cap, 0 = none
	// FS is the file system the device lives on (its mount point on the
	// mover's host); devices with the same mover and FS share its space.
	// FSSize and FSFree are that file system's, as statfs reports them.
	FS     string `json:"fs,omitempty"`
	FSSize int64  `json:"fs_size,omitempty"`
	FSFree int64  `json:"fs_free,omitempty"`
}

// PoolInfo sums the devices of one pool.
type PoolInfo struct {
	Name     string `json:"name"`
	Devices  int    `json:"devices"`
	Capacity int64  `json:"capacity"`
	Used     int64  `json:"used"`
	Free     int64  `json:"free"`
	// The file systems under the pool's devices, each counted once: how
	// many, their size and what they have free (whoever filled them).
	FileSystems int   `json:"file_systems,omitempty"`
	FSSize      int64 `json:"fs_size,omitempty"`
	FSFree      int64 `json:"fs_free,omitempty"`
}

// DFResponse is capacity and use per device and pool, and the caller's
// quotas.
type DFResponse struct {
	Devices []DeviceInfo `json:"devices"`
	Pools   []PoolInfo   `json:"pools"`
	Quotas  []QuotaInfo  `json:"quotas,omitempty"`
}

// Local is the core's answer to /v1/local: a Unix socket serving the same
// API, for clients whose HostID (mover.HostID) matches Host.
type Local struct {
	Socket string `json:"socket,omitempty"`
	Host   string `json:"host,omitempty"`
}

// MoverRegistration announces a mover and its devices to the core.
type MoverRegistration struct {
	ID      string       `json:"id"`
	Addr    string       `json:"addr"`
	Socket  string       `json:"socket,omitempty"` // Unix socket for clients on Host
	Host    string       `json:"host,omitempty"`   // boot id of the mover's host
	TLS     bool         `json:"tls,omitempty"`    // its TCP port speaks TLS
	Devices []DeviceInfo `json:"devices"`
	// Proof is an HMAC of the body fields under the cluster secret.
	Proof string `json:"proof"`
}

// MoverRegistered is the core's answer: the epoch movers must accept.
type MoverRegistered struct {
	Epoch int64 `json:"epoch"`
}

// COS is a class of service as admin commands show it.
type COS struct {
	Name        string `json:"name"`
	Pool        string `json:"pool"`
	StripeWidth int    `json:"stripe_width"`
	StripeUnit  int64  `json:"stripe_unit"`
	TapeCopies  int    `json:"tape_copies"`
	TapeOnly    bool   `json:"tape_only,omitempty"`
	Default     bool   `json:"default,omitempty"`
}

// TokenRequest asks for a new bearer token (admin only). The user is
// looked up on the server's host for its uid and groups unless UID is
// given.
type TokenRequest struct {
	User   string   `json:"user"`
	UID    *uint32  `json:"uid,omitempty"`
	GID    *uint32  `json:"gid,omitempty"`
	Groups []uint32 `json:"groups,omitempty"`
	TTL    float64  `json:"ttl_seconds,omitempty"` // 0: never expires
	Scopes []string `json:"scopes,omitempty"`      // "storage.read:/path"; none: the user's permissions
	// Kind is "" for a bearer token, "s3" for an S3 access key (whose ID
	// is the access key ID and whose secret is the secret access key).
	Kind string `json:"kind,omitempty"`
}

// TokenInfo describes a bearer token; Token (the secret) is set only in
// the reply that created it.
type TokenInfo struct {
	ID      string     `json:"id"`
	Kind    string     `json:"kind,omitempty"`
	Token   string     `json:"token,omitempty"`
	User    string     `json:"user"`
	UID     uint32     `json:"uid"`
	GID     uint32     `json:"gid"`
	Groups  []uint32   `json:"groups,omitempty"`
	Scopes  []string   `json:"scopes,omitempty"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// RevokeRequest revokes a token by ID.
type RevokeRequest struct {
	ID string `json:"id"`
}

// WhoAmI is who the server takes the caller to be.
type WhoAmI struct {
	User   string   `json:"user"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	Admin  bool     `json:"admin,omitempty"`
	Method string   `json:"method"`
	Token  string   `json:"token_id,omitempty"`
	Scopes []string `json:"scopes,omitempty"`
}

// QuotaSet sets a user's or group's limits (admin only); all zero removes
// the quota.
type QuotaSet struct {
	Kind      string `json:"kind"` // user or group
	Name      string `json:"name"` // a name of the server's host, or a number
	Bytes     int64  `json:"bytes,omitempty"`
	Files     int64  `json:"files,omitempty"`
	DiskBytes int64  `json:"disk_bytes,omitempty"`
}

// QuotaInfo is a user's or group's usage and limits (0: none).
type QuotaInfo struct {
	Kind         string `json:"kind"`
	ID           uint32 `json:"id"`
	Name         string `json:"name"`
	Files        int64  `json:"files"`
	Bytes        int64  `json:"bytes"`
	DiskBytes    int64  `json:"disk_bytes"`
	PendingBytes int64  `json:"pending_bytes,omitempty"` // reserved by writes in progress
	MaxFiles     int64  `json:"max_files,omitempty"`
	MaxBytes     int64  `json:"max_bytes,omitempty"`
	MaxDiskBytes int64  `json:"max_disk_bytes,omitempty"`
}
