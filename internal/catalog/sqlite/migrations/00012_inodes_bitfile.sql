-- +goose Up
-- The migration policy goes from bitfiles that lack tape copies to their
-- files: without this index each page of candidates scanned every inode.
CREATE INDEX inodes_bitfile ON inodes (bitfile) WHERE bitfile <> 0;

-- +goose Down
DROP INDEX inodes_bitfile;
