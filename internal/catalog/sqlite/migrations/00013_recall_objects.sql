-- +goose Up
-- The disk objects recalls write, each recorded before it is written: one
-- that no recall records as its file's disk copy (a crash, an attempt
-- given up) becomes garbage, instead of staying on its device unaccounted.
CREATE TABLE recall_objects (
  device TEXT NOT NULL,
  object TEXT NOT NULL,
  bitfile INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  PRIMARY KEY (device, object)
);
CREATE INDEX recall_objects_bitfile ON recall_objects (bitfile);

-- +goose Down
DROP TABLE recall_objects;
