-- +goose Up
-- Quotas (strata quota set): limits per user or group on bytes, files and
-- bytes on disk; 0 is no limit.
CREATE TABLE quotas (
  kind TEXT NOT NULL,
  id INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  files INTEGER NOT NULL,
  disk_bytes INTEGER NOT NULL,
  PRIMARY KEY (kind, id)
);

-- +goose Down
DROP TABLE quotas;
