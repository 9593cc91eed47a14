-- +goose Up
-- Quotas (strata quota set): limits per user or group on bytes, files and
-- bytes on disk; 0 is no limit.
CREATE TABLE quotas (
  kind TEXT COLLATE "C" NOT NULL,
  id BIGINT NOT NULL,
  bytes BIGINT NOT NULL,
  files BIGINT NOT NULL,
  disk_bytes BIGINT NOT NULL,
  PRIMARY KEY (kind, id)
);

-- +goose Down
DROP TABLE quotas;
