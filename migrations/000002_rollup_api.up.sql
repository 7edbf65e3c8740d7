-- pgsketch catalog, version 2: the rollup API users call in SQL
-- (create_rollup, drop_rollup, refresh_rollup, the rollups view) and the
-- functions pgsketch-proxy's refresher runs. The objects live in
-- sql/rollups_v1.sql; the line below includes that file (package migrations
-- expands it; psql's \ir does the same when run from this directory).

ALTER TABLE pgsketch.rollup_defs
    -- How far before the watermark an incremental refresh re-reads base
    -- rows to pick up late data; NULL means one bucket.
    ADD COLUMN late_window interval CONSTRAINT late_window_nonnegative CHECK (late_window >= interval '0'),
    -- Row count of the rollup table after the last refresh.
    ADD COLUMN rollup_rows bigint;

\ir ../sql/rollups_v1.sql
