-- +goose Up
-- Classes of service defined or edited at run time (strata admin cos set);
-- they override the configuration's classes of the same name.
CREATE TABLE cos (
  name TEXT PRIMARY KEY,
  pool TEXT NOT NULL,
  stripe_width INTEGER NOT NULL,
  stripe_unit INTEGER NOT NULL,
  tape_copies INTEGER NOT NULL,
  tape_only INTEGER NOT NULL
);

-- +goose Down
DROP TABLE cos;
