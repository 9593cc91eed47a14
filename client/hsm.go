package client

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-storage/strata/internal/api"
)

// HSM types, as the server reports them.
type (
	StageStatus = api.StageStatus
	HSMResult   = api.HSMResult
	Library     = api.Library
	// LibraryFault is a set of faults to inject into an emulated library.
	LibraryFault = api.LibraryFault
	COS          = api.COS
)

// Stage queues recalls of files that are on tape only and reports where
// each stands (files on disk report StageResident).
func (c *Client) Stage(ctx context.Context, paths []string, priority int) ([]StageStatus, error) {
	var r api.StageResponse
	err := c.do(ctx, "POST", "/v1/stage", nil, api.StageRequest{Paths: paths, Priority: priority}, &r)
	return r.Files, err
}

// StagePinned is Stage that also pins each file's disk copy for pin from
// now: the purge policy leaves it that long once it is back (a restore's
// lifetime).
func (c *Client) StagePinned(ctx context.Context, paths []string, pin time.Duration) ([]StageStatus, error) {
	var r api.StageResponse
	err := c.do(ctx, "POST", "/v1/stage", nil, api.StageRequest{Paths: paths, Pin: pin.Seconds()}, &r)
	return r.Files, err
}

// Release drops the pins of files' disk copies.
func (c *Client) Release(ctx context.Context, paths []string) error {
	return c.do(ctx, "POST", "/v1/release", nil, api.ReleaseRequest{Paths: paths}, nil)
}

// StageStatus reports a file's recall without queueing one.
func (c *Client) StageStatus(ctx context.Context, path string) (*StageStatus, error) {
	return c.stageWait(ctx, path, 0)
}

// stageWait asks for path's recall status, the server waiting up to wait
// for a queued or running recall to end first.
func (c *Client) stageWait(ctx context.Context, path string, wait time.Duration) (*StageStatus, error) {
	q := pathQuery(path)
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var st StageStatus
	return &st, c.do(ctx, "GET", "/v1/stage", q, nil, &st)
}

// Migrate copies files to tape now: the named ones, or with none every
// file of a class of service with tape copies, however young. It returns
// once the copies are on tape and verified.
func (c *Client) Migrate(ctx context.Context, paths ...string) (*HSMResult, error) {
	var r HSMResult
	return &r, c.do(ctx, "POST", "/v1/migrate", nil, api.MigrateRequest{Paths: paths}, &r)
}

// Purge drops disk copies now: of the named files (each must have a tape
// copy), or with none as the disk pools' watermarks require.
func (c *Client) Purge(ctx context.Context, paths ...string) (*HSMResult, error) {
	var r HSMResult
	return &r, c.do(ctx, "POST", "/v1/purge", nil, api.PurgeRequest{Paths: paths}, &r)
}

// Library reports the tape library: cartridges, drives and recall queue.
func (c *Client) Library(ctx context.Context) (*Library, error) {
	var l Library
	return &l, c.do(ctx, "GET", "/v1/library", nil, nil, &l)
}

// LostFile is a file with no good copy left.
type LostFile = api.LostFile

// LostFiles lists the files with no good copy left (admins only): each
// stays so until it is removed or written again.
func (c *Client) LostFiles(ctx context.Context) ([]LostFile, error) {
	var out []LostFile
	return out, c.do(ctx, "GET", "/v1/lost", nil, nil, &out)
}

// awaitRecall queues path's recall and waits until it is on disk.
// statusHold is how long one status request of a waiting get may be held.
const statusHold = 20 * time.Second

func (c *Client) awaitRecall(ctx context.Context, path string, o GetOptions) error {
	sts, err := c.Stage(ctx, []string{path}, 0)
	if err != nil {
		return err
	}
	if len(sts) != 1 {
		return fmt.Errorf("get %s: stage answered for %d files", path, len(sts))
	}
	st := &sts[0]
	if o.NoWait && st.State != api.StageResident {
		if st.Waiting != "" {
			return api.Errorf(api.ErrOffline, "get %s: on tape; recall queued on %s (%d requests ahead), waiting: %s", path, st.Volume, st.Position, st.Waiting)
		}
		return api.Errorf(api.ErrOffline, "get %s: on tape; recall queued on %s (%d requests ahead, about %.0f s)", path, st.Volume, st.Position, st.ETA)
	}
	wait := 20 * time.Millisecond
	for {
		if o.Staging != nil {
			o.Staging(*st)
		}
		switch st.State {
		case api.StageResident:
			return nil
		case api.StageFailed:
			return api.Errorf(api.ErrOffline, "get %s: recall failed: %s", path, st.Error)
		case api.StageOffline: // the recall was lost (a server restart between polls): ask again
			if _, err := c.Stage(ctx, []string{path}, 0); err != nil {
				return err
			}
		}
		// The server holds the question until the recall ends (or a
		// while passes); one that answers at once (an older one) is asked
		// again after a growing pause.
		t0 := time.Now()
		if st, err = c.stageWait(ctx, path, statusHold); err != nil {
			return err
		}
		if time.Since(t0) < wait && st.State != api.StageResident && st.State != api.StageFailed {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
		}
	}
}

// ClassesOfService lists the server's classes of service.
func (c *Client) ClassesOfService(ctx context.Context) ([]COS, error) {
	var out []COS
	return out, c.do(ctx, "GET", "/v1/cos", nil, nil, &out)
}

// Repack moves every live copy off a cartridge to others and erases it.
func (c *Client) Repack(ctx context.Context, volume string) (*HSMResult, error) {
	var r HSMResult
	return &r, c.do(ctx, "POST", "/v1/repack", nil, api.RepackRequest{Volume: volume}, &r)
}

// Scrub verifies the disk copies of the named files against their
// checksums; a damaged one is made again from a good copy (or reported
// lost) and listed in the result. Admin only.
func (c *Client) Scrub(ctx context.Context, paths ...string) (*HSMResult, error) {
	var r HSMResult
	return &r, c.do(ctx, "POST", "/v1/scrub", nil, api.ScrubRequest{Paths: paths}, &r)
}

// ScrubVolume reads every copy on a cartridge and verifies it as Scrub
// does. It holds a drive until it is done. Admin only.
func (c *Client) ScrubVolume(ctx context.Context, volume string) (*HSMResult, error) {
	var r HSMResult
	return &r, c.do(ctx, "POST", "/v1/scrub", nil, api.ScrubRequest{Volume: volume}, &r)
}

// SetDriveService takes a tape drive out of service (online false) or
// puts it back. A drive the library reports failed cannot be put back
// until it is repaired. Admin only.
func (c *Client) SetDriveService(ctx context.Context, drive string, online bool) error {
	return c.do(ctx, "POST", "/v1/library/service", nil, api.ServiceChange{Drive: drive, Online: online}, nil)
}

// SetCartridgeService takes a cartridge out of service or puts it back:
// out of service, it is neither read nor written, and recalls queued on it
// go to another copy or fail. Putting it back also ends the read-only
// state of a cartridge a damaged tape file was read from. Admin only.
func (c *Client) SetCartridgeService(ctx context.Context, volume string, online bool) error {
	return c.do(ctx, "POST", "/v1/library/service", nil, api.ServiceChange{Volume: volume, Online: online}, nil)
}

// InjectFault sets faults of the server's emulated library, to rehearse
// failures. Admin only.
func (c *Client) InjectFault(ctx context.Context, f LibraryFault) error {
	return c.do(ctx, "POST", "/v1/library/fault", nil, f, nil)
}

// SetCOS defines or changes a class of service on the server (stored in
// its catalog; it overrides the configuration's class of that name).
func (c *Client) SetCOS(ctx context.Context, k COS) (*COS, error) {
	var out COS
	return &out, c.do(ctx, "POST", "/v1/cos", nil, k, &out)
}
