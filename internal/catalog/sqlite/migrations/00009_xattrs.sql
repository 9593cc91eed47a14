-- +goose Up
-- Extended attributes (the mount's user.* attributes, S3 user metadata).
-- Rows of removed entries are dropped by the reclaim pass, not by the
-- remove itself: inode numbers are never reused, and the remove stays one
-- statement.
CREATE TABLE xattrs (
  inode INTEGER NOT NULL,
  name TEXT NOT NULL,
  value BLOB NOT NULL,
  PRIMARY KEY (inode, name)
);

-- +goose Down
DROP TABLE xattrs;
