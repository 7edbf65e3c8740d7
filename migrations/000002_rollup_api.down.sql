-- Removes the version 2 rollup API. Rollup tables themselves are user data
-- in the source tables' schemas and are left alone.
DROP VIEW pgsketch.rollups;
DROP FUNCTION pgsketch.catalog();
DROP FUNCTION pgsketch.refresh_finish(text, timestamptz, boolean);
DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
DROP FUNCTION pgsketch.bucket_local(text, timestamp);
DROP FUNCTION pgsketch.refresh_rollup(text, boolean, text, text);
DROP FUNCTION pgsketch.drop_rollup(text, boolean);
DROP FUNCTION pgsketch.lock_class();
DROP FUNCTION pgsketch.create_rollup(text, text, text, text, text, text[], text[], text[], text[], text[], integer, integer, interval);
DROP FUNCTION pgsketch.sync_grants(text);
DROP FUNCTION pgsketch.raise_unless(boolean, text, text, text);
DROP FUNCTION pgsketch.is_utc(text);
DROP FUNCTION pgsketch.base_type(regclass, text);
DROP FUNCTION pgsketch.exact_column(regclass, text);
DROP FUNCTION pgsketch.hll_hashable(regtype);
DROP FUNCTION pgsketch.column_type(regclass, text);
DROP FUNCTION pgsketch.grain_interval(text);
ALTER TABLE pgsketch.rollup_defs DROP COLUMN rollup_rows, DROP COLUMN late_window;
