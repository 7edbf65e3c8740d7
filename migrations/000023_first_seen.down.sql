-- Removes version 23: every rollup's first-seen tables are dropped, and
-- drop_rollup, protect_tables, refresh_finish and catalog
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
DROP FUNCTION pgsketch.protect_tables(text);
ALTER FUNCTION pgsketch.protect_tables_v18(text) RENAME TO protect_tables;
CREATE OR REPLACE FUNCTION pgsketch.drop_rollup(name text, if_exists boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    l pgsketch.rollup_levels;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(name));
    SELECT * INTO d FROM pgsketch.rollup_defs r WHERE r.name = drop_rollup.name;
    IF NOT FOUND THEN
        IF if_exists THEN
            RAISE NOTICE 'rollup % does not exist, skipping', name;
            RETURN;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('rollup %L does not exist', name);
    END IF;
    PERFORM pgsketch.capture_remove(name);
    FOR l IN SELECT * FROM pgsketch.rollup_levels x WHERE x.rollup = drop_rollup.name LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I.%I', l.table_schema, l.table_name);
    END LOOP;
    EXECUTE format('DROP TABLE IF EXISTS %I.%I', d.rollup_schema, d.rollup_table);
    DELETE FROM pgsketch.rollup_defs r WHERE r.name = drop_rollup.name;
END $$;
DROP FUNCTION pgsketch.drop_first_seen(text);
DROP FUNCTION pgsketch.add_first_seen(text, text);
DROP FUNCTION pgsketch.first_seen_define(text, regclass, text);
DROP FUNCTION pgsketch.first_seen_floor(pgsketch.rollup_defs, text, timestamptz);
DROP FUNCTION pgsketch.first_seen_bound(text, timestamptz);
DROP FUNCTION pgsketch.first_seen_bucket(pgsketch.rollup_defs, text, text);
DROP FUNCTION pgsketch.first_seen_counts(text);
DROP FUNCTION pgsketch.first_seen_table(text);
DROP TABLE pgsketch.rollup_first_seen;
