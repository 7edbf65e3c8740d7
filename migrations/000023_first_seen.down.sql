-- Removes version 23: every rollup's first-seen tables are dropped, and
-- drop_rollup, protect_tables, refresh_begin, refresh_finish and catalog
-- go back to their earlier versions.
DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT rollup FROM pgsketch.rollup_first_seen ORDER BY rollup LOOP
        EXECUTE format('DROP TABLE IF EXISTS pgsketch.%I, pgsketch.%I', pgsketch.first_seen_table(r), pgsketch.first_seen_counts(r));
    END LOOP;
END $$;
DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v21() RENAME TO catalog;
DROP FUNCTION pgsketch.first_seen(text, timestamptz, timestamptz);
DROP FUNCTION pgsketch.refresh_finish(text, timestamptz, boolean);
ALTER FUNCTION pgsketch.refresh_finish_v18(text, timestamptz, boolean) RENAME TO refresh_finish;
DROP FUNCTION pgsketch.first_seen_update(text, timestamptz);
DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v22(text, boolean, text, text, integer) RENAME TO refresh_begin;
DROP TRIGGER first_seen_drained ON pgsketch.rollup_dirty;
DROP FUNCTION pgsketch.first_seen_drained();
DROP FUNCTION pgsketch.protect_tables(text);
ALTER FUNCTION pgsketch.protect_tables_v18(text) RENAME TO protect_tables;
DROP FUNCTION pgsketch.drop_rollup(text, boolean);
ALTER FUNCTION pgsketch.drop_rollup_v6(text, boolean) RENAME TO drop_rollup;
DROP FUNCTION pgsketch.drop_first_seen(text);
DROP FUNCTION pgsketch.add_first_seen(text, text);
DROP FUNCTION pgsketch.first_seen_floor(pgsketch.rollup_defs, text, timestamptz);
DROP FUNCTION pgsketch.first_seen_bound(text, timestamptz);
DROP FUNCTION pgsketch.first_seen_bucket(pgsketch.rollup_defs, text, text);
DROP FUNCTION pgsketch.first_seen_counts(text);
DROP FUNCTION pgsketch.first_seen_table(text);
DROP TABLE pgsketch.rollup_first_seen;
