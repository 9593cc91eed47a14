-- +goose Up
-- The tape tier. A bitfile's disk copy is its segments (copy = disk_gen, so
-- a disk copy recalled after a purge gets object names never used before);
-- its tape copies are rows of tape_copies, each a run of bytes inside one
-- tape file (small files share a tape file: aggregation).
ALTER TABLE bitfiles ADD COLUMN on_disk INTEGER NOT NULL DEFAULT 1;
ALTER TABLE bitfiles ADD COLUMN tapes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bitfiles ADD COLUMN disk_gen INTEGER NOT NULL DEFAULT 0;
-- Migration looks for committed bitfiles short of tape copies.
CREATE INDEX bitfiles_untaped ON bitfiles (tapes, id) WHERE state = 1;

CREATE TABLE tape_copies (
  bitfile INTEGER NOT NULL,
  copy INTEGER NOT NULL,
  volume TEXT NOT NULL,
  seq INTEGER NOT NULL,
  position INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  crc32c INTEGER NOT NULL,
  PRIMARY KEY (bitfile, copy)
);
CREATE INDEX tape_copies_volume ON tape_copies (volume, seq);

-- Disk objects nothing refers to any more (a purged disk copy), until a
-- mover has deleted them; their space is still counted as used.
CREATE TABLE garbage (
  device TEXT NOT NULL,
  object TEXT NOT NULL,
  length INTEGER NOT NULL,
  PRIMARY KEY (device, object)
);

-- Recall requests: what users asked for survives a restart.
CREATE TABLE recalls (
  bitfile INTEGER PRIMARY KEY,
  queued INTEGER NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE recalls;
DROP TABLE garbage;
DROP TABLE tape_copies;
DROP INDEX bitfiles_untaped;
ALTER TABLE bitfiles DROP COLUMN disk_gen;
ALTER TABLE bitfiles DROP COLUMN tapes;
ALTER TABLE bitfiles DROP COLUMN on_disk;
