-- Removes version 11: the functions go back to their earlier forms, kept
-- under other names by the up migration, and the rollup tables lose their
-- policy. The capture functions of version 11 record faults in a table
-- this removes, so they go with their triggers: the next refresh installs
-- version 6's and rebuilds the rollup whole (the record of captured
-- relations is cleared); until then the proxy answers exactly.

DO $$
DECLARE
    r text;
BEGIN
    PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %s() CASCADE', pgsketch.capture_function(r));
    END LOOP;
END $$;

DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT p.polrelid::regclass AS rel FROM pg_policy p WHERE p.polname = 'pgsketch_source_readers' LOOP
        EXECUTE format('DROP POLICY pgsketch_source_readers ON %s', t.rel);
        EXECUTE format('ALTER TABLE %s DISABLE ROW LEVEL SECURITY', t.rel);
    END LOOP;
END $$;

DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v7(text, boolean, text, text, integer) RENAME TO refresh_begin;
DROP FUNCTION pgsketch.capture_check(text, timestamptz, timestamptz);
ALTER FUNCTION pgsketch.capture_check_v6(text, timestamptz, timestamptz) RENAME TO capture_check;
DROP FUNCTION pgsketch.capture_reconcile(text);
ALTER FUNCTION pgsketch.capture_reconcile_v6(text) RENAME TO capture_reconcile;
DROP FUNCTION pgsketch.capture_remove(text);
ALTER FUNCTION pgsketch.capture_remove_v6(text) RENAME TO capture_remove;
DROP FUNCTION pgsketch.capture_prepare(text);
ALTER FUNCTION pgsketch.capture_prepare_v6(text) RENAME TO capture_prepare;
-- sync_grants (version 3): the rollup table and each of its level tables
-- get the SELECT grants of the source table.
CREATE OR REPLACE FUNCTION pgsketch.sync_grants(rollup text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    dst regclass;
    l pgsketch.rollup_levels;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = rollup;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', rollup));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    dst := to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table));
    PERFORM pgsketch.raise_unless(src IS NOT NULL, '42P01',
        format('source table %I.%I of rollup %L does not exist', d.source_schema, d.source_table, rollup));
    PERFORM pgsketch.raise_unless(dst IS NOT NULL, '42P01',
        format('rollup table %I.%I of rollup %L does not exist', d.rollup_schema, d.rollup_table, rollup),
        format('Drop the rollup with SELECT pgsketch.drop_rollup(%L) and create it again.', rollup));
    PERFORM pgsketch.copy_select_grants(src, dst);
    FOR l IN SELECT * FROM pgsketch.rollup_levels AS x WHERE x.rollup = sync_grants.rollup ORDER BY x.grain LOOP
        dst := to_regclass(format('%I.%I', l.table_schema, l.table_name));
        PERFORM pgsketch.raise_unless(dst IS NOT NULL, '42P01',
            format('level table %I.%I of rollup %L does not exist', l.table_schema, l.table_name, rollup),
            format('Drop the level with SELECT pgsketch.drop_rollup_level(%L, %L) and add it again.', rollup, l.grain));
        PERFORM pgsketch.copy_select_grants(src, dst);
    END LOOP;
END $$;

\ir ../sql/capture_v2.sql

DROP FUNCTION pgsketch.rebuild_refused(pgsketch.rollup_defs, regclass, regclass);
DROP FUNCTION pgsketch.capture_define(text);
DROP FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text);
DROP FUNCTION pgsketch.capture_logged_setting(text);
DROP FUNCTION pgsketch.protect_tables(text);
DROP FUNCTION pgsketch.require_source_read(text);
DROP FUNCTION pgsketch.capture_drift(regclass, jsonb, jsonb);
DROP FUNCTION pgsketch.capture_fingerprint(text, oid, text[]);
DROP FUNCTION pgsketch.distributed(oid);
DROP FUNCTION pgsketch.read_columns(pgsketch.rollup_defs);
DROP FUNCTION pgsketch.ddl_lock_timeout();
DROP TABLE pgsketch.rollup_faults;
DELETE FROM pgsketch.rollup_captured;
ALTER TABLE pgsketch.rollup_captured DROP COLUMN fingerprint;
