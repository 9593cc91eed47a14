-- +goose Up
-- A tape copy may be striped over several cartridges (one tape file per
-- stripe, written and read on several drives at once): a copy is the rows
-- of one copy number, one per stripe.
CREATE TABLE tape_copies_new (
  bitfile INTEGER NOT NULL,
  copy INTEGER NOT NULL,
  stripe INTEGER NOT NULL,
  volume TEXT NOT NULL,
  seq INTEGER NOT NULL,
  position INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  crc32c INTEGER NOT NULL,
  PRIMARY KEY (bitfile, copy, stripe)
);
INSERT INTO tape_copies_new (bitfile, copy, stripe, volume, seq, position, offset, length, crc32c)
  SELECT bitfile, copy, 0, volume, seq, position, offset, length, crc32c FROM tape_copies;
DROP TABLE tape_copies;
ALTER TABLE tape_copies_new RENAME TO tape_copies;
CREATE INDEX tape_copies_volume ON tape_copies (volume, seq);

-- +goose Down
DELETE FROM tape_copies WHERE stripe > 0;
CREATE TABLE tape_copies_old (
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
INSERT INTO tape_copies_old SELECT bitfile, copy, volume, seq, position, offset, length, crc32c FROM tape_copies;
DROP TABLE tape_copies;
ALTER TABLE tape_copies_old RENAME TO tape_copies;
CREATE INDEX tape_copies_volume ON tape_copies (volume, seq);
