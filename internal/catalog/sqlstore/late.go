package sqlstore

// What a group's operations leave for its end. Creates, puts and removes
// each change rows that many of them share: their directory's times and
// their devices' used bytes. Written by every operation, those rows are
// a third of the statements of a group of creates in one directory and
// two of the eight of a small file's reservation and commit. An operation
// queued with writeLate (op.late) records them instead; the writer writes
// one UPDATE per directory and per device at the end of the group, or
// before an operation that may read or set them (any not late), so they
// end as if written in turn (TestDirectoryTimesInAGroupFollowItsOrder,
// TestDeviceSpaceInAGroup). A late operation that fails leaves none of
// what it recorded. In a careful run (every operation in a savepoint)
// nothing waits.

import (
	"fmt"

	"github.com/strata-storage/strata/internal/api"
)

type late struct {
	on bool // the current operation's writes wait
	// The current operation's, kept once it succeeds.
	touches []dirTouch
	space   []spaceDelta
	// The group's: a directory's latest times and the directories in
	// the order first touched; a device's row as read and what the
	// group's operations reserved on it, in the order first reserved.
	dirs    map[int64]int64
	dirList []int64
	devs    map[string]*devSpace
	devList []string
}

type dirTouch struct{ dir, when int64 }

type spaceDelta struct {
	dev string
	n   int64
}

// devSpace is a device's row as the group first read it, and the bytes
// its operations have reserved since.
type devSpace struct {
	capacity, used, reserved int64
}

// beginLate starts an operation: its writes wait if on.
func (t *Tx) beginLate(on bool) {
	t.late.on = on
	t.late.touches, t.late.space = t.late.touches[:0], t.late.space[:0]
}

// endLate ends the operation: what it recorded joins the group's if it
// succeeded.
func (t *Tx) endLate(ok bool) {
	l := &t.late
	if ok {
		for _, d := range l.touches {
			if l.dirs == nil {
				l.dirs = map[int64]int64{}
			}
			if _, ok := l.dirs[d.dir]; !ok {
				l.dirList = append(l.dirList, d.dir)
			}
			l.dirs[d.dir] = d.when
		}
		for _, d := range l.space {
			l.devs[d.dev].reserved += d.n
		}
	}
	l.on = false
	l.touches, l.space = l.touches[:0], l.space[:0]
}

// reserveSpace takes n bytes of device dev for the current operation, or
// fails with api.ErrNoSpace when fewer are free.
func (t *Tx) reserveSpace(dev string, n int64) error {
	l := &t.late
	if !l.on {
		k, err := t.Exec("UPDATE devices SET used = used + ? WHERE id = ? AND used + ? <= capacity", n, dev, n)
		if err != nil {
			return err
		}
		if k == 0 {
			return t.whyFull(dev, n)
		}
		return nil
	}
	d, ok := l.devs[dev]
	if !ok {
		d = &devSpace{}
		if err := t.QueryRow("SELECT capacity, used FROM devices WHERE id = ?", dev).Scan(&d.capacity, &d.used); err != nil {
			return notFound(err, "device %q", dev)
		}
		if l.devs == nil {
			l.devs = map[string]*devSpace{}
		}
		l.devs[dev] = d
		l.devList = append(l.devList, dev)
	}
	used := d.used + d.reserved
	for _, s := range l.space {
		if s.dev == dev {
			used += s.n
		}
	}
	if used+n > d.capacity {
		return full(dev, n, d.capacity, used)
	}
	l.space = append(l.space, spaceDelta{dev, n})
	return nil
}

// whyFull explains a reservation of n bytes on dev that updated no row.
func (t *Tx) whyFull(dev string, n int64) error {
	var capacity, used int64
	if err := t.QueryRow("SELECT capacity, used FROM devices WHERE id = ?", dev).Scan(&capacity, &used); err != nil {
		return notFound(err, "device %q", dev)
	}
	return full(dev, n, capacity, used)
}

func full(dev string, n, capacity, used int64) error {
	return api.Errorf(api.ErrNoSpace, "device %s: %d bytes to reserve, %d free", dev, n, max(capacity-used, 0))
}

// flushLate writes what the group's operations left. A failure runs the
// group again carefully, where nothing waits; a lost database leaves it
// unanswered (see runGroup).
func (t *Tx) flushLate() (groupOutcome, error) {
	err := t.writeLate()
	switch {
	case err == nil:
		return groupDone, nil
	case t.s.transient(err):
		t.tx.Rollback()
		return groupLost, err
	}
	t.tx.Rollback()
	return groupCareful, nil
}

// writeLate writes the group's directory times and reservations so far
// and forgets the devices' rows as read: before an operation, or within
// one about to change a device's row itself (which then may not reserve
// space late itself).
func (t *Tx) writeLate() error {
	l := &t.late
	if len(l.space) > 0 {
		return fmt.Errorf("catalog: an operation that reserved space late writes a device's row")
	}
	for _, dir := range l.dirList {
		if err := t.setDirTimes(dir, l.dirs[dir]); err != nil {
			return err
		}
	}
	clear(l.dirs)
	l.dirList = l.dirList[:0]
	for _, dev := range l.devList {
		if d := l.devs[dev]; d.reserved != 0 {
			if _, err := t.Exec("UPDATE devices SET used = used + ? WHERE id = ?", d.reserved, dev); err != nil {
				return fmt.Errorf("catalog: device %s: %w", dev, err)
			}
		}
	}
	clear(l.devs)
	l.devList = l.devList[:0]
	return nil
}
