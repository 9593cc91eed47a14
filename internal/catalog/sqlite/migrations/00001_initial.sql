-- +goose Up
-- AUTOINCREMENT: inode and bitfile numbers are never reused, because object
-- names and (later) FUSE inode numbers are derived from them.
CREATE TABLE inodes (
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
CREATE UNIQUE INDEX inodes_dirent ON inodes (parent, name);
INSERT INTO inodes (id, parent, name, kind, mode, uid, gid, size, mtime, ctime, atime)
  VALUES (1, 0, '', 1, 493, 0, 0, 0, 0, 0, 0);

CREATE TABLE bitfiles (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  state INTEGER NOT NULL,
  size INTEGER NOT NULL,
  stripe_width INTEGER NOT NULL,
  stripe_unit INTEGER NOT NULL,
  fixity TEXT NOT NULL DEFAULT '',
  epoch INTEGER NOT NULL,
  lease INTEGER NOT NULL
);
-- Only pending and dead bitfiles are ever scanned by state.
CREATE INDEX bitfiles_unsettled ON bitfiles (state) WHERE state <> 1;

CREATE TABLE segments (
  bitfile INTEGER NOT NULL,
  copy INTEGER NOT NULL,
  stripe INTEGER NOT NULL,
  device TEXT NOT NULL,
  object TEXT NOT NULL,
  length INTEGER NOT NULL,
  crc32c INTEGER NOT NULL,
  PRIMARY KEY (bitfile, copy, stripe)
);

CREATE TABLE devices (
  id TEXT PRIMARY KEY,
  pool TEXT NOT NULL,
  mover TEXT NOT NULL,
  capacity INTEGER NOT NULL,
  used INTEGER NOT NULL,
  bandwidth INTEGER NOT NULL
);

CREATE TABLE meta (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT INTO meta (name, value) VALUES ('epoch', 0);

-- +goose Down
DROP TABLE meta;
DROP TABLE devices;
DROP TABLE segments;
DROP TABLE bitfiles;
DROP TABLE inodes;
