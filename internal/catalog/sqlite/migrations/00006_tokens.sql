-- +goose Up
-- Bearer tokens (strata token create): who a token stands for and what it
-- may do. Only the SHA-256 of a token's secret is kept.
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  user_name TEXT NOT NULL,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL,
  groups_list TEXT NOT NULL DEFAULT '',
  scopes TEXT NOT NULL DEFAULT '',
  hash TEXT NOT NULL,
  created INTEGER NOT NULL,
  expires INTEGER NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE tokens;
