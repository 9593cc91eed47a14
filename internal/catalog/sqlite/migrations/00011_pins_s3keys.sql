-- +goose Up
-- A recalled file's disk copy may be pinned (a restore's Days, a stage's
-- diskLifetime): the purge policy leaves it until pinned_until (Unix ns).
ALTER TABLE bitfiles ADD COLUMN pinned_until INTEGER NOT NULL DEFAULT 0;
-- S3 access keys live beside bearer tokens: kind 's3', and since Signature
-- V4 is an HMAC keyed by the secret, the server keeps the secret itself.
ALTER TABLE tokens ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN secret TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE bitfiles DROP COLUMN pinned_until;
ALTER TABLE tokens DROP COLUMN kind;
ALTER TABLE tokens DROP COLUMN secret;
