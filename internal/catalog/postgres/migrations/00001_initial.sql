-- +goose Up
-- The catalog's schema on PostgreSQL: the SQLite catalog's tables as its
-- migrations leave them (schema 5), in PostgreSQL's types. Every integer
-- is BIGINT (CRC32C values and nanosecond times do not fit INTEGER). Names
-- sort bytewise (COLLATE "C"), as in SQLite, so that listings page in the
-- same order whatever the cluster's locale.

-- Inode and bitfile ids are issued by the catalog's writer, a block at a
-- time; next is the first id it has not reserved. Ids are never reused:
-- object names and FUSE inode numbers derive from them.
CREATE TABLE ids (
  name TEXT PRIMARY KEY,
  next BIGINT NOT NULL
);
INSERT INTO ids (name, next) VALUES ('inodes', 2), ('bitfiles', 1);

CREATE TABLE inodes (
  id BIGINT PRIMARY KEY,
  parent BIGINT NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  kind BIGINT NOT NULL,
  mode BIGINT NOT NULL,
  uid BIGINT NOT NULL,
  gid BIGINT NOT NULL,
  size BIGINT NOT NULL,
  mtime BIGINT NOT NULL,
  ctime BIGINT NOT NULL,
  atime BIGINT NOT NULL,
  cos TEXT NOT NULL DEFAULT '',
  bitfile BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX inodes_dirent ON inodes (parent, name);
INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime)
  VALUES (1, 0, '', 1, 493, 0, 0, 0, 0, 0, 0);

CREATE TABLE bitfiles (
  id BIGINT PRIMARY KEY,
  state BIGINT NOT NULL,
  size BIGINT NOT NULL,
  stripe_width BIGINT NOT NULL,
  stripe_unit BIGINT NOT NULL,
  fixity TEXT NOT NULL DEFAULT '',
  epoch BIGINT NOT NULL,
  lease BIGINT NOT NULL,
  on_disk BIGINT NOT NULL DEFAULT 1,
  tapes BIGINT NOT NULL DEFAULT 0,
  disk_gen BIGINT NOT NULL DEFAULT 0
);
-- Only pending and dead bitfiles are ever scanned by state.
CREATE INDEX bitfiles_unsettled ON bitfiles (state) WHERE state <> 1;
-- Migration looks for committed bitfiles short of tape copies.
CREATE INDEX bitfiles_untaped ON bitfiles (tapes, id) WHERE state = 1;

CREATE TABLE segments (
  bitfile BIGINT NOT NULL,
  copy BIGINT NOT NULL,
  stripe BIGINT NOT NULL,
  device TEXT NOT NULL,
  object TEXT NOT NULL,
  length BIGINT NOT NULL,
  crc32c BIGINT NOT NULL,
  PRIMARY KEY (bitfile, copy, stripe)
);

CREATE TABLE devices (
  id TEXT COLLATE "C" PRIMARY KEY,
  pool TEXT NOT NULL,
  mover TEXT NOT NULL,
  capacity BIGINT NOT NULL,
  used BIGINT NOT NULL,
  bandwidth BIGINT NOT NULL
);

CREATE TABLE meta (
  name TEXT PRIMARY KEY,
  value BIGINT NOT NULL
);
INSERT INTO meta (name, value) VALUES ('epoch', 0);

-- A tape copy, possibly striped over several cartridges: the rows of one
-- copy number, one per stripe, each a run of bytes inside one tape file.
CREATE TABLE tape_copies (
  bitfile BIGINT NOT NULL,
  copy BIGINT NOT NULL,
  stripe BIGINT NOT NULL,
  volume TEXT COLLATE "C" NOT NULL,
  seq BIGINT NOT NULL,
  position BIGINT NOT NULL,
  "offset" BIGINT NOT NULL,
  length BIGINT NOT NULL,
  crc32c BIGINT NOT NULL,
  PRIMARY KEY (bitfile, copy, stripe)
);
CREATE INDEX tape_copies_volume ON tape_copies (volume, seq);

-- Disk objects nothing refers to any more, until a mover has deleted them.
CREATE TABLE garbage (
  device TEXT COLLATE "C" NOT NULL,
  object TEXT COLLATE "C" NOT NULL,
  length BIGINT NOT NULL,
  PRIMARY KEY (device, object)
);

-- Recall requests: what users asked for survives a restart.
CREATE TABLE recalls (
  bitfile BIGINT PRIMARY KEY,
  queued BIGINT NOT NULL,
  priority BIGINT NOT NULL DEFAULT 0
);

-- Classes of service defined or edited at run time.
CREATE TABLE cos (
  name TEXT COLLATE "C" PRIMARY KEY,
  pool TEXT NOT NULL,
  stripe_width BIGINT NOT NULL,
  stripe_unit BIGINT NOT NULL,
  tape_copies BIGINT NOT NULL,
  tape_only BIGINT NOT NULL
);

-- +goose Down
DROP TABLE cos;
DROP TABLE recalls;
DROP TABLE garbage;
DROP TABLE tape_copies;
DROP TABLE meta;
DROP TABLE devices;
DROP TABLE segments;
DROP TABLE bitfiles;
DROP TABLE inodes;
DROP TABLE ids;
