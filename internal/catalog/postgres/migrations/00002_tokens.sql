-- +goose Up
-- Bearer tokens (strata token create): who a token stands for and what it
-- may do. Only the SHA-256 of a token's secret is kept.
CREATE TABLE tokens (
  id TEXT COLLATE "C" PRIMARY KEY,
  user_name TEXT NOT NULL,
  uid BIGINT NOT NULL,
  gid BIGINT NOT NULL,
  groups_list TEXT NOT NULL DEFAULT '',
  scopes TEXT NOT NULL DEFAULT '',
  hash TEXT NOT NULL,
  created BIGINT NOT NULL,
  expires BIGINT NOT NULL,
  revoked BIGINT NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE tokens;
