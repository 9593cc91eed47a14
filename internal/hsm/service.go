package hsm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/tape"
)

// Drives and cartridges out of service. A drive is out when the library
// reports it failed, when a transfer on it failed (driveFailed), or when
// an admin took it out; a cartridge when the library reports it
// unreadable or an admin took it out. The same rule holds for recall,
// migration, repack and scrub, and an admin puts either back.

// outByAdmin is why a drive or cartridge an admin took out is out. An
// admin's word is kept in the catalog (catalog.OutOfService), so it holds
// across restarts and fail-overs until an admin brings the device back;
// the library's own reports are asked afresh.
const outByAdmin = "offline (admin)"

// Kinds of catalog.OutOfService.
const (
	outDrive     = "drive"
	outCartridge = "cartridge"
	// outWrites is a cartridge read-only since a damaged tape file was
	// read from it (cartridgeDamaged).
	outWrites = "cartridge-writes"
)

// readOnly is why a cartridge takes no writes: the damaged tape files read
// from it.
type readOnly struct {
	files int
	why   string
}

// cartridgeDamaged makes volume read-only once a damaged tape file has been
// read from it (as Enstore marks such a volume): what is on it is still
// read, for files with no other copy, but nothing new is written to a
// cartridge that has lost data, and an admin sees it in strata admin
// tapes until they put it back in service (strata admin tapes online),
// having looked at it.
func (h *Engine) cartridgeDamaged(ctx context.Context, volume string, cause error) {
	h.markReadOnly(ctx, volume, 1, func(n int) string {
		return fmt.Sprintf("read-only: %d damaged tape file(s), the last: %v", n, cause)
	}, "hsm: cartridge read-only: a tape file read from it was damaged")
}

// cartridgeWriteFailed makes volume read-only after a tape file's write on
// it failed with its drive not reported failed (as Enstore and CTA stop
// writing to such a volume): what it holds is still read, and an admin
// puts it back online having looked at it.
func (h *Engine) cartridgeWriteFailed(ctx context.Context, volume, drive string, cause error) {
	h.markReadOnly(ctx, volume, 0, func(int) string {
		return fmt.Sprintf("read-only: a write in %s failed: %v", drive, cause)
	}, "hsm: cartridge read-only: a write on it failed")
}

// markReadOnly records volume read-only, counting damaged more damaged tape
// files, for why(the count), in memory and in the catalog.
func (h *Engine) markReadOnly(ctx context.Context, volume string, damaged int, why func(int) string, msg string) {
	if volume == "" {
		return
	}
	h.mu.Lock()
	n := h.readOnly[volume].files + damaged
	ro := readOnly{files: n, why: why(n)}
	h.readOnly[volume] = ro
	h.mu.Unlock()
	h.log.Warn(msg, "volume", volume, "why", ro.why)
	if err := h.store.SetOutOfService(ctx, catalog.OutOfService{Kind: outWrites, ID: volume, Why: ro.why, Since: h.clk.Now().UnixNano(), Count: n}); err != nil {
		h.log.Warn("hsm: the cartridge's read-only mark is not kept (it holds until a restart)", "volume", volume, "err", err)
	}
}

// loadService takes out of service again the drives and cartridges an
// admin took out before this engine started (a restart, a standby taking
// over), before any work is handed out.
func (h *Engine) loadService() {
	if h.store == nil { // a test of the engine's choices alone
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outs, err := h.store.OutOfService(ctx)
	if err != nil {
		h.log.Error("hsm: cannot read which drives and cartridges are out of service; all are in", "err", err)
		return
	}
	for _, o := range outs {
		switch o.Kind {
		case outDrive:
			h.drivesOut[o.ID] = o.Why
		case outCartridge:
			h.volsOut[o.ID] = o.Why
		case outWrites:
			h.readOnly[o.ID] = readOnly{files: o.Count, why: o.Why}
		}
		h.log.Info("hsm: out of service", o.Kind, o.ID, "why", o.Why, "since", time.Unix(0, o.Since).UTC().Format(time.RFC3339))
	}
}

// keepService records an admin's change of service in the catalog.
func (h *Engine) keepService(ctx context.Context, kind, id string, online bool) error {
	o := catalog.OutOfService{Kind: kind, ID: id}
	if !online {
		o.Why, o.Since = outByAdmin, h.clk.Now().UnixNano()
	}
	return h.store.SetOutOfService(ctx, o)
}

// driveOutLocked says why drive d is out of service, or "" if it is in.
func (h *Engine) driveOutLocked(d tape.DriveInfo) string {
	switch {
	case d.Failed:
		return "failed (the library reports it)"
	case d.Lost:
		return "lost (its tape server does not answer)"
	}
	return h.drivesOut[d.ID]
}

// volumeOutLocked says why cartridge ci is out of service, or "".
func (h *Engine) volumeOutLocked(ci tape.CartridgeInfo) string {
	if ci.Unreadable {
		return "unreadable"
	}
	return h.volsOut[ci.Volume]
}

// noUsableDriveLocked says, when every drive is out of service, why each
// is; "" when one is usable (busy or not).
func (h *Engine) noUsableDriveLocked(drives []tape.DriveInfo) string {
	var why []string
	for _, d := range drives {
		w := h.driveOutLocked(d)
		if w == "" {
			return ""
		}
		why = append(why, d.ID+" "+w)
	}
	sort.Strings(why)
	return "no usable tape drive (" + strings.Join(why, "; ") + ")"
}

// noUsableDrive is noUsableDriveLocked for callers not holding h.mu.
func (h *Engine) noUsableDrive() string {
	drives := h.lib.Drives()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.noUsableDriveLocked(drives)
}

// errNoUsableDrive is the error for an operation that needs a drive and
// finds none it may use, naming why, or errNoDrive when drives are only
// busy.
func (h *Engine) errNoUsableDrive(what string) error {
	if why := h.noUsableDrive(); why != "" {
		return api.Errorf(api.ErrUnavailable, "%s: %s", what, why)
	}
	return fmt.Errorf("%s: %w", what, errNoDrive)
}

// SetService takes a drive or a cartridge out of service, or puts it
// back.
func (h *Engine) SetService(ctx context.Context, r api.ServiceChange) error {
	switch {
	case (r.Drive == "") == (r.Volume == ""):
		return api.Errorf(api.ErrInvalid, "library: name a drive or a cartridge")
	case r.Drive != "":
		return h.setDrive(ctx, r.Drive, r.Online)
	}
	return h.setVolume(ctx, r.Volume, r.Online)
}

func (h *Engine) setDrive(ctx context.Context, id string, online bool) error {
	var d *tape.DriveInfo
	for _, di := range h.lib.Drives() {
		if di.ID == id {
			d = &di
		}
	}
	if d == nil {
		return api.Errorf(api.ErrNotFound, "library: no drive %q", id)
	}
	if online && d.Failed {
		return api.Errorf(api.ErrInvalid, "library: drive %s: the library still reports it failed; repair it, then bring it online", id)
	}
	if err := h.keepService(ctx, outDrive, id, online); err != nil {
		return err
	}
	h.mu.Lock()
	if online {
		was := h.drivesOut[id]
		delete(h.drivesOut, id)
		h.mu.Unlock()
		if was != "" {
			h.log.Info("hsm: drive back in service", "drive", id, "was", was)
		}
		h.poke()
		return nil
	}
	h.drivesOut[id] = outByAdmin
	idle := h.busy[id] == ""
	h.mu.Unlock()
	h.log.Info("hsm: drive taken out of service", "drive", id)
	if idle && d.Volume != "" { // free its cartridge for the other drives
		if err := h.lib.Dismount(ctx, id); err != nil {
			h.log.Warn("hsm: cannot empty the drive taken out of service", "drive", id, "volume", d.Volume, "err", err)
		}
	}
	h.poke()
	return nil
}

func (h *Engine) setVolume(ctx context.Context, volume string, online bool) error {
	if !h.hasVolume(volume) {
		return api.Errorf(api.ErrNotFound, "library: no cartridge %q", volume)
	}
	if err := h.keepService(ctx, outCartridge, volume, online); err != nil {
		return err
	}
	if online {
		if err := h.store.SetOutOfService(ctx, catalog.OutOfService{Kind: outWrites, ID: volume}); err != nil {
			return err
		}
	}
	h.mu.Lock()
	if online {
		delete(h.volsOut, volume)
		delete(h.readOnly, volume)
		h.mu.Unlock()
		h.log.Info("hsm: cartridge back in service", "volume", volume)
		h.poke()
		return nil
	}
	h.volsOut[volume] = outByAdmin
	// Recalls queued on it go to another copy, or fail saying why.
	reqs := h.sched.Remove(volume)
	h.mu.Unlock()
	h.log.Info("hsm: cartridge taken out of service", "volume", volume, "recalls", len(reqs))
	h.fallback(ctx, reqs, api.Errorf(api.ErrOffline, "cartridge %s is out of service", volume))
	return nil
}

// InjectFault sets faults of an emulated library.
func (h *Engine) InjectFault(r api.LibraryFault) error {
	fi, ok := h.lib.(tape.FaultInjector)
	if !ok {
		return api.Errorf(api.ErrInvalid, "library: this library takes no injected faults (the emulated one does)")
	}
	var errs []error
	for _, f := range []struct {
		name string
		fn   func() error
	}{
		{r.FailDrive, func() error { return fi.FailDrive(r.FailDrive, true) }},
		{r.RepairDrive, func() error { return fi.FailDrive(r.RepairDrive, false) }},
		{r.Unreadable, func() error { return fi.SetUnreadable(r.Unreadable, true) }},
		{r.Readable, func() error { return fi.SetUnreadable(r.Readable, false) }},
		{r.WriteErrors, func() error { return fi.SetWriteErrors(r.WriteErrors, true) }},
		{r.Writable, func() error { return fi.SetWriteErrors(r.Writable, false) }},
	} {
		if f.name == "" {
			continue
		}
		if err := f.fn(); err != nil {
			errs = append(errs, api.Errorf(api.ErrNotFound, "library: %v", err))
		}
	}
	if r.RobotFailures != nil {
		if *r.RobotFailures < 0 {
			errs = append(errs, api.Errorf(api.ErrInvalid, "library: robot failures must not be negative"))
		} else {
			fi.FailRobot(*r.RobotFailures)
		}
	}
	robot := -1
	if r.RobotFailures != nil {
		robot = *r.RobotFailures
	}
	h.log.Warn("hsm: faults injected into the emulated library", "fail_drive", r.FailDrive, "repair_drive", r.RepairDrive,
		"unreadable", r.Unreadable, "readable", r.Readable, "write_errors", r.WriteErrors, "writable", r.Writable, "robot_failures", robot)
	h.poke()
	return errors.Join(errs...)
}
