-- +goose Up
-- A dead bitfile's lease is when it died, so that reclaim can spare the
-- readers of a file just removed or replaced (reclaim_grace). Bitfiles that
-- died before this version are past any grace.
UPDATE bitfiles SET lease = 0 WHERE state = 2;

-- +goose Down
SELECT 1;
