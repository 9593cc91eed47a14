-- +goose Up
-- Tape drives and cartridges an admin took out of service, and cartridges
-- read-only since a damaged tape file was read from them: they stay so
-- across restarts and fail-overs until an admin brings them back.
CREATE TABLE out_of_service (
  kind TEXT NOT NULL,
  id TEXT NOT NULL,
  why TEXT NOT NULL,
  since INTEGER NOT NULL,
  count INTEGER NOT NULL DEFAULT 0, -- damaged tape files read (cartridge-writes)
  PRIMARY KEY (kind, id)
);

-- +goose Down
DROP TABLE out_of_service;
