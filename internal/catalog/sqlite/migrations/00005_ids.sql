-- +goose Up
-- Inode and bitfile ids are issued by the catalog's writer, not by
-- AUTOINCREMENT, which read and wrote sqlite_sequence on every insert (a
-- page more in every commit). They are still never reused: next is the
-- first id the writer has not reserved, and it reserves a block at a time.
CREATE TABLE ids (
  name TEXT PRIMARY KEY,
  next INTEGER NOT NULL
);
INSERT INTO ids (name, next) SELECT 'inodes', MAX(
  COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'inodes'), 0),
  COALESCE((SELECT MAX(id) FROM inodes), 0)) + 1;
INSERT INTO ids (name, next) SELECT 'bitfiles', MAX(
  COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'bitfiles'), 0),
  COALESCE((SELECT MAX(id) FROM bitfiles), 0)) + 1;

CREATE TABLE inodes_new (
  id INTEGER PRIMARY KEY,
  parent INTEGER NOT NULL,
  name TEXT NOT NULL,
  kind INTEGER NOT NULL,
  mode INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL,
  size INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  ctime INTEGER NOT NULL,
  atime INTEGER NOT NULL,
  cos TEXT NOT NULL DEFAULT '',
  bitfile INTEGER NOT NULL DEFAULT 0
);
INSERT INTO inodes_new (id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime, cos, bitfile)
  SELECT id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime, cos, bitfile FROM inodes;
DROP TABLE inodes;
ALTER TABLE inodes_new RENAME TO inodes;
CREATE UNIQUE INDEX inodes_dirent ON inodes (parent, name);

CREATE TABLE bitfiles_new (
  id INTEGER PRIMARY KEY,
  state INTEGER NOT NULL,
  size INTEGER NOT NULL,
  stripe_width INTEGER NOT NULL,
  stripe_unit INTEGER NOT NULL,
  fixity TEXT NOT NULL DEFAULT '',
  epoch INTEGER NOT NULL,
  lease INTEGER NOT NULL,
  on_disk INTEGER NOT NULL DEFAULT 1,
  tapes INTEGER NOT NULL DEFAULT 0,
  disk_gen INTEGER NOT NULL DEFAULT 0
);
INSERT INTO bitfiles_new (id, state, size, stripe_width, stripe_unit, fixity, epoch, lease, on_disk, tapes, disk_gen)
  SELECT id, state, size, stripe_width, stripe_unit, fixity, epoch, lease, on_disk, tapes, disk_gen FROM bitfiles;
DROP TABLE bitfiles;
ALTER TABLE bitfiles_new RENAME TO bitfiles;
CREATE INDEX bitfiles_unsettled ON bitfiles (state) WHERE state <> 1;
CREATE INDEX bitfiles_untaped ON bitfiles (tapes, id) WHERE state = 1;

-- +goose Down
CREATE TABLE inodes_old (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  parent INTEGER NOT NULL,
  name TEXT NOT NULL,
  kind INTEGER NOT NULL,
  mode INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL,
  size INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  ctime INTEGER NOT NULL,
  atime INTEGER NOT NULL,
  cos TEXT NOT NULL DEFAULT '',
  bitfile INTEGER NOT NULL DEFAULT 0
);
INSERT INTO inodes_old (id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime, cos, bitfile)
  SELECT id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime, cos, bitfile FROM inodes;
DROP TABLE inodes;
ALTER TABLE inodes_old RENAME TO inodes;
CREATE UNIQUE INDEX inodes_dirent ON inodes (parent, name);

CREATE TABLE bitfiles_old (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  state INTEGER NOT NULL,
  size INTEGER NOT NULL,
  stripe_width INTEGER NOT NULL,
  stripe_unit INTEGER NOT NULL,
  fixity TEXT NOT NULL DEFAULT '',
  epoch INTEGER NOT NULL,
  lease INTEGER NOT NULL,
  on_disk INTEGER NOT NULL DEFAULT 1,
  tapes INTEGER NOT NULL DEFAULT 0,
  disk_gen INTEGER NOT NULL DEFAULT 0
);
INSERT INTO bitfiles_old (id, state, size, stripe_width, stripe_unit, fixity, epoch, lease, on_disk, tapes, disk_gen)
  SELECT id, state, size, stripe_width, stripe_unit, fixity, epoch, lease, on_disk, tapes, disk_gen FROM bitfiles;
DROP TABLE bitfiles;
ALTER TABLE bitfiles_old RENAME TO bitfiles;
CREATE INDEX bitfiles_unsettled ON bitfiles (state) WHERE state <> 1;
CREATE INDEX bitfiles_untaped ON bitfiles (tapes, id) WHERE state = 1;

-- What the writer may have issued stays unissued by AUTOINCREMENT.
DELETE FROM sqlite_sequence WHERE name IN ('inodes', 'bitfiles');
INSERT INTO sqlite_sequence (name, seq) SELECT name, next - 1 FROM ids WHERE name IN ('inodes', 'bitfiles');
DROP TABLE ids;
