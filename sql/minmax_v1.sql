-- pgsketch catalog objects, version 28: the min or max of a column whose
-- type is a domain over char(n) is kept in a bpchar column. create_rollup
-- (version 8's, unchanged) names a partial's type as pg_typeof gives it, without a modifier, and
-- keeps the source column's own type only when the two agree; for such a
-- domain pg_typeof gives its base type, bpchar, whose name without a
-- modifier ("character") PostgreSQL reads as char(1): the refresh failed
-- to store any longer value.

-- widen_minmax gives the min and max columns of rollup r's table and of
-- its levels' tables that are char(1) where the source column is not a
-- blank-padded type without a length (bpchar), keeping their rows.
CREATE FUNCTION pgsketch.widen_minmax(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    tbl regclass;
    col record;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    IF NOT FOUND THEN
        RETURN; -- capture_prepare says so
    END IF;
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    FOR tbl IN SELECT to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))
               UNION ALL
               SELECT to_regclass(format('%I.%I', l.table_schema, l.table_name)) FROM pgsketch.rollup_levels l WHERE l.rollup = r LOOP
        CONTINUE WHEN tbl IS NULL;
        FOR col IN SELECT a.attname
                     FROM pgsketch.rollup_measures m
                     JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = m.column_name AND a.attnum > 0 AND NOT a.attisdropped
                    WHERE m.rollup = r AND m.kind IN ('min', 'max')
                      AND a.atttypid = 'bpchar'::regtype AND format_type(a.atttypid, a.atttypmod) = 'character(1)'
                      AND pgsketch.column_type(src, m.expression) IS DISTINCT FROM 'character(1)' LOOP
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I TYPE bpchar', tbl, col.attname);
        END LOOP;
    END LOOP;
END $$;

-- capture_prepare (version 28): widen_minmax under the rollup's lock,
-- then version 22's. Every refresh runs it before it writes a rollup row,
-- so a rollup made by create_rollup (whose body names its parameters by
-- the function's name, and so cannot be wrapped) is widened before its
-- first refresh writes.
ALTER FUNCTION pgsketch.capture_prepare(text) RENAME TO capture_prepare_v22;
CREATE FUNCTION pgsketch.capture_prepare(r text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
    PERFORM pgsketch.widen_minmax(r);
    PERFORM set_config('lock_timeout', timeout, true);
    RETURN pgsketch.capture_prepare_v22(r);
END $$;

-- The rollups made before, under each rollup's lock, waiting for its
-- tables no longer than DDL of pgsketch's may: a table that stays busy
-- fails the upgrade, to be run again.
DO $do$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
        BEGIN
            PERFORM pgsketch.widen_minmax(r);
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION 'pgsketch: the tables of rollup % are busy: %', r, SQLERRM
                USING ERRCODE = 'lock_not_available',
                      HINT = 'Run the upgrade again when fewer statements read the rollup.';
        END;
    END LOOP;
END $do$;
