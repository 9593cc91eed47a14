-- +goose Up
-- Files found with no good copy left: the mark outlives a restart, so a
-- lost file is reported as lost (stat, archiveinfo, strata admin lost) and
-- not tried again, until it is removed or replaced.
CREATE TABLE lost (
  bitfile INTEGER PRIMARY KEY,
  why TEXT NOT NULL,
  since INTEGER NOT NULL
);

-- +goose Down
DROP TABLE lost;
