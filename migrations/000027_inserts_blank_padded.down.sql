-- Removes version 27: inserts_columns goes back to its form of version 18.
-- The tables of inserted rows keep their widened columns (a char(n) column
-- of char(1) would fail the source's writes again), and their comments go
-- back to the form version 18 prints, so that its inserts_define keeps
-- them and the rows they hold.
DROP FUNCTION pgsketch.inserts_columns(pgsketch.rollup_defs, regclass);
ALTER FUNCTION pgsketch.inserts_columns_v18(pgsketch.rollup_defs, regclass) RENAME TO inserts_columns;
DO $do$
DECLARE
    r text;
    tbl regclass;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        tbl := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
        CONTINUE WHEN tbl IS NULL OR NOT EXISTS (
            SELECT FROM pg_attribute a
             WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
               AND format_type(a.atttypid, NULL) <> format_type(a.atttypid, -1));
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
        EXECUTE format('COMMENT ON TABLE %s IS %L', tbl, pgsketch.inserts_comment(tbl, NULL));
    END LOOP;
END $do$;
DROP FUNCTION pgsketch.inserts_comment(regclass, integer);
