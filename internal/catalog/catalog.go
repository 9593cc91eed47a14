// Package catalog owns Strata's durable metadata: the namespace (directories
// and files with their attributes), each file's bitfile (its data's copies
// and segments on devices), the devices themselves, and the core's epoch.
//
// Store is the one interface over the database. Its implementations
// (sqlite, the embedded default, and postgres) pass catalogtest.Run, the
// one conformance suite. Every mutating method is one
// atomic transaction, so the invariants below hold after any crash:
//
//   - a file entry points only at a committed bitfile (or none, when empty);
//   - a bitfile is pending (being written), committed, or dead (its objects
//     await reclaim); nothing else references a dead bitfile;
//   - device use counts every pending reservation and committed segment.
package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/api"
)

// Kind is the type of a namespace entry.
type Kind int8

// Entry kinds.
const (
	KindDir     Kind = 1
	KindFile    Kind = 2
	KindSymlink Kind = 3
)

// RootID is the inode number of "/".
const RootID int64 = 1

// Inode is one namespace entry. Times are Unix nanoseconds.
type Inode struct {
	ID, Parent          int64
	Name                string
	Kind                Kind
	Mode                uint32
	UID, GID            uint32
	Size                int64
	Mtime, Ctime, Atime int64
	COS                 string
	Bitfile             int64  // 0 when the entry has no data
	Target              string // a symbolic link's
	// Xattrs, given to Commit when not nil, replace the entry's extended
	// attributes in the same transaction. Reads leave it nil.
	Xattrs map[string][]byte
	// Replaced, set in what Commit, Concat and Rename return when the
	// entry took the place of a file, is the file it replaced: what quota
	// usage no longer counts. Reads leave it nil.
	Replaced *Replaced
}

// Replaced is a file a commit replaced: its owner, size and whether its
// data was on disk (counted in the disk tier's usage).
type Replaced struct {
	UID, GID uint32
	Size     int64
	OnDisk   bool
}

// BitfileState is a bitfile's life-cycle state.
type BitfileState int8

// Bitfile states.
const (
	Pending   BitfileState = 0
	Committed BitfileState = 1
	Dead      BitfileState = 2
)

// Bitfile is a file's data: its segments on devices.
type Bitfile struct {
	ID          int64
	State       BitfileState
	Size        int64
	StripeWidth int
	StripeUnit  int64
	Fixity      string
	Epoch       int64 // core epoch that created it
	// Lease is, for a pending bitfile, the Unix ns after which it may be
	// reclaimed; for a dead one, when it died (0 for one that was never
	// readable), so that reclaim can spare readers that hold its layout.
	Lease int64
	// Segments are the disk copy (empty when it was purged: OnDisk is
	// false), all of copy number DiskGen.
	Segments []Segment
	OnDisk   bool
	DiskGen  int
	// Tapes are the verified tape copies' stripes, by copy and stripe.
	Tapes []TapeCopy
	// PinnedUntil (Unix ns) keeps the disk copy from the purge policy
	// until then: a restore's or a stage's disk lifetime. 0 is unpinned.
	PinnedUntil int64
}

// TapeCopy is one stripe of one copy of a file's data on tape: a run of
// bytes in the data of one tape file (shared with other files when they
// were aggregated). An unstriped copy is one stripe, 0, holding the whole
// file; a striped copy holds stripe i of the disk layout in stripe i.
type TapeCopy struct {
	Copy     int
	Stripe   int
	Volume   string
	Seq      int   // tape file
	Position int64 // the tape file's start, bytes from the beginning of tape
	Offset   int64 // in the tape file's data
	Length   int64
	CRC32C   uint32
}

// NewTapeCopy is one bitfile's tape copy for AddTapeCopies: its stripes
// (one for an unstriped copy), numbered by the store.
type NewTapeCopy struct {
	Bitfile int64
	Stripes []TapeCopy
}

// Residency says where a bitfile's data is.
type Residency struct {
	OnDisk bool
	Tapes  int // tape copies
}

// Garbage is a disk object no copy refers to any more.
type Garbage struct {
	Device, Object string
	Length         int64
}

// Candidate is a file the HSM may act on, with its path's inode.
type Candidate struct {
	Inode   Inode
	Bitfile Bitfile
}

// COS is a class of service: where new files of that class go, how they
// are striped, and how many copies they keep on tape.
type COS struct {
	Name        string
	Pool        string
	StripeWidth int
	StripeUnit  int64
	// TapeCopies is the number of tape copies migration makes (0: the
	// class stays on disk).
	TapeCopies int
	// TapeOnly drops the disk copy as soon as the tape copies exist: the
	// disk pool is only a landing buffer.
	TapeOnly bool
}

// Recall is a queued request to bring a file back to disk.
type Recall struct {
	Bitfile  int64
	Queued   int64 // Unix ns
	Priority int
}

// RecallObject is a disk object a recall of Bitfile is about to write, by
// the core of Epoch.
type RecallObject struct {
	Bitfile, Epoch int64
	Device, Object string
}

// Lost is a file found with no good copy left, and why: it stays marked
// (readers told so at once, migration and recall not trying it again)
// until the file is removed or replaced.
type Lost struct {
	Bitfile int64
	Inode   int64 // the file that has it (LostFiles)
	Why     string
	Since   int64 // Unix ns
}

// OutOfService is a tape drive or cartridge an admin took out of service,
// or a cartridge made read-only after a damaged tape file was read from
// it, and why: it stays so across restarts and fail-overs until an admin
// brings it back.
type OutOfService struct {
	Kind  string // "drive", "cartridge", or "cartridge-writes" (read-only)
	ID    string
	Why   string
	Since int64 // Unix ns
	Count int   // cartridge-writes: the damaged tape files read from it
}

// Segment is one stripe of one copy on one device. For a pending bitfile,
// Length is the space reserved; after commit, the bytes stored.
type Segment struct {
	Copy, Stripe int
	Device       string
	Object       string
	Length       int64
	CRC32C       uint32
}

// Device is a storage device known to the catalog.
type Device struct {
	ID        string
	Pool      string
	Mover     string
	Capacity  int64
	Used      int64
	Bandwidth int64
}

// Attr carries the attributes SetAttr may change; nil fields stay.
type Attr struct {
	Mode         *uint32
	UID, GID     *uint32
	Mtime, Atime *int64
	COS          *string // a directory's: the default for files below it
	Ctime        int64   // always set by the caller
}

// ObjectName is the device object that holds one segment. Bitfile IDs are
// never reused, so an object name is never reused either, and a late delete
// can never hit newer data.
func ObjectName(bitfile int64, copy, stripe int) string {
	return fmt.Sprintf("%016x.%d.%d", bitfile, copy, stripe)
}

// Optional capabilities a Store may have beyond the interface. The server
// uses them where a store offers them (both SQL stores do); a store
// without them still serves.

// GroupCounter reports how many group transactions the catalog's writer
// has run and how many operations they held (their ratio is the group
// size).
type GroupCounter interface {
	Groups() (groups, ops int64)
}

// GroupObserver calls fn with the size and duration of every group
// transaction, for /metrics.
type GroupObserver interface {
	ObserveGroups(fn func(ops int, took time.Duration))
}

// Expecter is told of a write on its way: the caller will make one
// catalog change under ctx soon (a call of a batch that arrived with
// others). While such writes are coming, the writer waits briefly for
// them before it starts a group without them, so that the calls of a
// batch share one group and its sync. release (idempotent) says the
// caller will write nothing more under ctx; the first write does too.
type Expecter interface {
	Expecting(ctx context.Context) (_ context.Context, release func())
}

// CacheReporter reports the inode cache's entries, hits and misses.
type CacheReporter interface {
	CacheStats() (entries, hits, misses int64)
}

// PriorityWriter raises the writer goroutine's scheduling priority; the
// error says why it could not.
type PriorityWriter interface {
	WriterPriority() error
}

// Pinger checks the database still answers, on the connection that holds
// the store's lock: a standby-ready server stops serving when it cannot
// confirm for a while that it still owns the catalog.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Store is the catalog database.
type Store interface {
	// Get returns the inode with the given id.
	Get(ctx context.Context, id int64) (Inode, error)
	// Lookup returns the entry name in directory parent.
	Lookup(ctx context.Context, parent int64, name string) (Inode, error)
	// List returns entries of directory dir sorted by name: those named
	// after after ("" from the first), at most limit of them (0: all). A
	// directory of millions is read a page at a time this way, each page
	// one index range scan.
	List(ctx context.Context, dir int64, after string, limit int) ([]Inode, error)

	// Mkdir creates directory in.Name in in.Parent. ErrExist if the name is
	// taken; ErrNotFound if the parent is gone; ErrNotDir if it is a file.
	Mkdir(ctx context.Context, in Inode) (Inode, error)
	// Symlink creates the symbolic link in.Name in in.Parent, pointing at
	// in.Target (which the catalog never follows). ErrExist if the name
	// is taken; ErrNotFound if the parent is gone; ErrNotDir if it is a
	// file.
	Symlink(ctx context.Context, in Inode) (Inode, error)
	// Commit makes a file visible at in.Parent/in.Name with the data of
	// bitfile b (nil for an empty file), whose segments carry their final
	// lengths and CRCs. An existing file there is replaced atomically when
	// replace is set (its bitfile dies, and the returned Inode's Replaced
	// describes it); otherwise ErrExist. A directory there is ErrIsDir.
	Commit(ctx context.Context, in Inode, b *Bitfile, replace bool) (Inode, error)
	// Concat makes a file visible at in.Parent/in.Name, as Commit does,
	// whose data is the files sources (inode IDs) joined in order, and
	// removes those files, in one transaction and without copying: stripe
	// i of the new bitfile, of unit bytes a stripe, is source i's one disk
	// segment. Every source must be a committed file of one stripe on
	// disk without tape copies, of unit bytes (the last: 1 to unit);
	// anything else is ErrInvalid and changes nothing. fixity is the new
	// bitfile's whole-file digest ("" for none).
	Concat(ctx context.Context, in Inode, sources []int64, unit int64, fixity string, replace bool) (Inode, error)
	// Rename moves an entry. It refuses to move a directory below itself
	// (ErrInvalid) and to replace a directory with a file or vice versa.
	// It returns the moved entry, whose Replaced describes a file it
	// replaced.
	Rename(ctx context.Context, srcParent int64, srcName string, dstParent int64, dstName string, replace bool, ctime int64) (Inode, error)
	// Remove deletes an entry; a non-empty directory only when recursive.
	// The data of removed files dies and awaits reclaim.
	// It returns the removed entry.
	Remove(ctx context.Context, parent int64, name string, recursive bool) (Inode, error)
	// SetAttr changes attributes of id.
	SetAttr(ctx context.Context, id int64, a Attr) (Inode, error)

	// CreatePending records a bitfile being written, with its segments'
	// reservations, and returns it with ID and object names filled in.
	// A reservation that would take a device past its capacity fails the
	// whole call with api.ErrNoSpace and records nothing: the core places
	// from a view of the devices that concurrent creates may have filled
	// since.
	CreatePending(ctx context.Context, b Bitfile) (Bitfile, error)
	// Bitfile returns a bitfile with its segments.
	Bitfile(ctx context.Context, id int64) (Bitfile, error)
	// Abort kills a pending bitfile.
	Abort(ctx context.Context, id int64) error
	// ExpirePending kills pending bitfiles from an epoch before epoch or
	// whose lease ended before now; it returns how many. The recall
	// objects of epochs before epoch become garbage.
	ExpirePending(ctx context.Context, epoch, now int64) (int, error)
	// DeadBitfiles returns up to limit bitfiles that died before before
	// (Unix ns), with their segments. A committed bitfile dies when its
	// file is removed or replaced, at the store's wall clock; a pending
	// one that is aborted or expires dies at time 0.
	DeadBitfiles(ctx context.Context, before int64, limit int) ([]Bitfile, error)
	// Purge forgets a dead bitfile whose objects are gone and returns its
	// space to the devices.
	Purge(ctx context.Context, id int64) error

	// AddTapeCopy records a verified tape copy of a committed bitfile: its
	// stripes (one for an unstriped copy), given a new copy number
	// together. ErrNotFound if the bitfile is gone or no longer committed
	// (the file was removed or replaced while it was copied).
	AddTapeCopy(ctx context.Context, bitfile int64, stripes ...TapeCopy) error
	// AddTapeCopies records many tape copies as AddTapeCopy records one,
	// in a few statements a thousand copies (one by one, the copies of a
	// tape file of small files cost the catalog a fifth of the time the
	// drive took to write them). added[i] says whether copies[i] was
	// recorded: a bitfile gone or no longer committed is left out, not
	// an error. A bitfile named twice gets two copies.
	AddTapeCopies(ctx context.Context, copies []NewTapeCopy) (added []bool, err error)
	// MigrationCandidates returns committed files of the given classes of
	// service with fewer than copies tape copies, modified before before
	// (Unix ns), with bitfile ID above after, in bitfile order.
	MigrationCandidates(ctx context.Context, cos []string, copies int, before, after int64, limit int) ([]Candidate, error)
	// PurgeCandidates returns files with a disk copy and at least one tape
	// copy, least recently accessed first.
	PurgeCandidates(ctx context.Context, now int64, limit int) ([]Candidate, error)
	// Pin sets a committed bitfile's PinnedUntil (0 unpins).
	Pin(ctx context.Context, bitfile, until int64) error
	// DropDiskCopy turns a bitfile's disk copy into garbage. It refuses
	// (ErrInvalid) unless a tape copy exists: never the last copy.
	DropDiskCopy(ctx context.Context, bitfile int64) error
	// RestoreDiskCopy records a new disk copy (segments with final lengths
	// and CRCs, copy number filled in) of a bitfile that has none.
	RestoreDiskCopy(ctx context.Context, bitfile int64, width int, unit int64, segs []Segment) error
	// Garbage returns up to limit unreferenced disk objects.
	Garbage(ctx context.Context, limit int) ([]Garbage, error)
	// ForgetGarbage records that an object was deleted and returns its
	// space to its device.
	ForgetGarbage(ctx context.Context, g Garbage) error
	// QueueRecall records a recall request (one per bitfile; a second
	// raises the priority) and reports whether one was already queued.
	QueueRecall(ctx context.Context, r Recall) (bool, error)
	// Recalls lists queued recalls in bitfile order.
	Recalls(ctx context.Context) ([]Recall, error)
	// DoneRecall removes a recall request. The objects recorded for its
	// recall (AddRecallObject) that no RestoreDiskCopy took become garbage.
	DoneRecall(ctx context.Context, bitfile int64) error
	// AddRecallObject records an object a recall is about to write: it
	// becomes garbage unless RestoreDiskCopy takes it as a segment, when
	// the recall is done (DoneRecall) or its core's epoch has passed
	// (ExpirePending), so no crash or failed attempt leaves it unreclaimed.
	// An object recorded already is ErrExist.
	AddRecallObject(ctx context.Context, o RecallObject) error
	// MarkLost records a bitfile as lost (a second mark keeps the first).
	MarkLost(ctx context.Context, l Lost) error
	// LostFiles lists the lost bitfiles of live files, in bitfile order,
	// each with its file's inode.
	LostFiles(ctx context.Context) ([]Lost, error)
	// SetOutOfService records a tape drive or cartridge taken out of
	// service (o.Why not ""), or, with o.Why "", brought back.
	SetOutOfService(ctx context.Context, o OutOfService) error
	// OutOfService lists the drives and cartridges out of service, by
	// kind and id.
	OutOfService(ctx context.Context) ([]OutOfService, error)
	// CopiesOn returns up to limit committed files with a tape copy on
	// volume, in bitfile order, from the first bitfile after after.
	CopiesOn(ctx context.Context, volume string, after int64, limit int) ([]Candidate, error)
	// DropTapeCopy forgets one tape copy; never the last copy of a file
	// (ErrInvalid).
	DropTapeCopy(ctx context.Context, bitfile int64, copy int) error
	// PutCOS records a class of service (replacing one of that name).
	PutCOS(ctx context.Context, k COS) error
	// ClassesOfService lists the stored classes by name.
	ClassesOfService(ctx context.Context) ([]COS, error)
	// Residency returns where each of the given bitfiles' data is (absent
	// ones are left out), in one query per few hundred: listings use it.
	Residency(ctx context.Context, ids []int64) (map[int64]Residency, error)
	// Path returns the absolute path of inode id.
	Path(ctx context.Context, id int64) (string, error)

	// PutDevice records a device, keeping its accounted use.
	PutDevice(ctx context.Context, d Device) error
	// Devices lists devices by ID.
	Devices(ctx context.Context) ([]Device, error)
	// NextEpoch increments and returns the core epoch.
	NextEpoch(ctx context.Context) (int64, error)

	// PutToken records a new bearer token; ErrExist if its ID is taken.
	PutToken(ctx context.Context, t Token) error
	// Token returns the token with the given ID (revoked ones too).
	Token(ctx context.Context, id string) (Token, error)
	// Tokens lists every token by creation time.
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken marks a token revoked at the given time (Unix ns);
	// ErrNotFound if there is none, and revoking twice keeps the first
	// time.
	RevokeToken(ctx context.Context, id string, at int64) error

	// Xattrs returns the extended attributes of inode id (none: empty).
	Xattrs(ctx context.Context, id int64) (map[string][]byte, error)
	// SetXattr sets one extended attribute of inode id: ErrNotFound if
	// the inode is gone; with XattrCreate ErrExist if it is set, with
	// XattrReplace ErrNoAttr if it is not.
	SetXattr(ctx context.Context, id int64, name string, value []byte, how XattrSet) error
	// RemoveXattr removes one; ErrNoAttr if it is not set.
	RemoveXattr(ctx context.Context, id int64, name string) error
	// DropOrphanXattrs forgets the attributes of removed entries (which
	// Remove and Rename leave, inode numbers never being reused) and
	// returns how many.
	DropOrphanXattrs(ctx context.Context) (int, error)

	// PutQuota records a quota, replacing one for the same user or group;
	// one with no limits is removed.
	PutQuota(ctx context.Context, q Quota) error
	// Quotas lists the quotas by kind and id.
	Quotas(ctx context.Context) ([]Quota, error)
	// Usage returns what every user and every group holds (files, their
	// bytes, and the bytes of those with a disk copy), by kind and id;
	// one full pass over the namespace, for a start or a resync.
	Usage(ctx context.Context) ([]Usage, error)

	Close() error
}

// XattrSet says whether SetXattr may create or replace an attribute.
type XattrSet int

// setxattr(2)'s flags.
const (
	XattrAny     XattrSet = 0
	XattrCreate  XattrSet = 1 // fail if it exists
	XattrReplace XattrSet = 2 // fail if it does not
)

// Token is a bearer token's record: who it stands for, what it may do,
// and the hash of its secret (never the secret). Times are Unix ns;
// Expires 0 never expires, Revoked 0 is not revoked.
type Token struct {
	ID       string
	User     string
	UID, GID uint32
	Groups   []uint32
	Scopes   []string // "storage.read:/path"; none: the user's permissions alone
	// Kind is TokenBearer or TokenS3.
	Kind string
	// Hash is a bearer token's secret's hash; Secret is an S3 key's
	// secret itself, which Signature V4 needs to check an HMAC.
	Hash    string
	Secret  string
	Created int64
	Expires int64
	Revoked int64
}

// Credential kinds (Token.Kind).
const (
	TokenBearer = ""   // a bearer token: only its hash is kept
	TokenS3     = "s3" // an S3 access key: the secret is kept
)

// Quota kinds.
const (
	QuotaUser  = "user"
	QuotaGroup = "group"
)

// Quota limits what a user's (or a group's) files may hold; 0 is no
// limit.
type Quota struct {
	Kind      string // QuotaUser or QuotaGroup
	ID        uint32 // uid or gid
	Bytes     int64
	Files     int64
	DiskBytes int64
}

// Usage is what a user's (or a group's) files hold.
type Usage struct {
	Kind      string
	ID        uint32
	Files     int64
	Bytes     int64
	DiskBytes int64 // of files with a disk copy
}

// MaxNameLen bounds one path component, as on most POSIX file systems.
const MaxNameLen = 255

// SplitPath validates an absolute path and returns its components ("/" has
// none). Empty components from doubled or trailing slashes are dropped;
// "." and ".." are refused rather than interpreted, so a path always names
// the same entry however it is reached.
func SplitPath(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, api.Errorf(api.ErrInvalid, "path %q is not absolute", p)
	}
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c == "" {
			continue
		}
		if err := ValidName(c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ValidName checks one path component.
func ValidName(c string) error {
	switch {
	case c == "." || c == "..":
		return api.Errorf(api.ErrInvalid, "path component %q not allowed", c)
	case len(c) > MaxNameLen:
		return api.Errorf(api.ErrNameTooLong, "name %.20q... longer than %d bytes", c, MaxNameLen)
	case strings.ContainsAny(c, "/\x00"):
		return api.Errorf(api.ErrInvalid, "name %q contains / or NUL", c)
	}
	return nil
}

// Resolve walks components from the root.
func Resolve(ctx context.Context, s Store, comps []string) (Inode, error) {
	in, err := s.Get(ctx, RootID)
	if err != nil {
		return in, err
	}
	for i, c := range comps {
		if in.Kind != KindDir {
			return in, api.Errorf(api.ErrNotDir, "/%s", strings.Join(comps[:i], "/"))
		}
		in, err = s.Lookup(ctx, in.ID, c)
		if err != nil {
			return in, fmt.Errorf("/%s: %w", strings.Join(comps[:i+1], "/"), err)
		}
	}
	return in, nil
}
