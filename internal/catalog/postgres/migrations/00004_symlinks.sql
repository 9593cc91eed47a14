-- +goose Up
-- Symbolic links (kind 3) keep their target here; the catalog never
-- follows them (clients do: the kernel, under a mount).
ALTER TABLE inodes ADD COLUMN target TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE inodes DROP COLUMN target;
