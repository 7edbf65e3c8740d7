-- Removes version 6: the capture triggers of every rollup, the change log,
-- and the functions as version 5 had them.

DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs LOOP
        PERFORM pgsketch.capture_remove(r);
    END LOOP;
END $$;

DROP VIEW pgsketch.rollups;
CREATE VIEW pgsketch.rollups AS
SELECT d.name,
       format('%I.%I', d.source_schema, d.source_table) AS source,
       format('%I.%I', d.rollup_schema, d.rollup_table) AS rollup_table,
       d.time_column,
       d.grain,
       d.time_zone,
       d.dimensions,
       (SELECT array_agg(CASE WHEN m.kind = 'hll'
                              THEN format('%s: hll(%s) log2m=%s regwidth=%s', m.column_name, m.expression, m.log2m, m.regwidth)
                              ELSE format('%s: %s(%s)', m.column_name, m.kind, m.expression) END
                         ORDER BY m.position)
          FROM pgsketch.rollup_measures m WHERE m.rollup = d.name) AS measures,
       d.watermark,
       d.rollup_rows AS rows,
       pg_total_relation_size(to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))) AS bytes,
       d.refreshed_at AS last_refresh,
       now() - d.watermark AS lag,
       d.version
  FROM pgsketch.rollup_defs d;
GRANT SELECT ON pgsketch.rollups TO PUBLIC;
GRANT SELECT ON pgsketch.rollups TO PUBLIC;
COMMENT ON VIEW pgsketch.rollups IS 'Every pgsketch rollup with its source, grain, dimensions, measures, size and freshness';

DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v3() RENAME TO catalog;

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
    FOR l IN SELECT * FROM pgsketch.rollup_levels x WHERE x.rollup = drop_rollup.name LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I.%I', l.table_schema, l.table_name);
    END LOOP;
    EXECUTE format('DROP TABLE IF EXISTS %I.%I', d.rollup_schema, d.rollup_table);
    DELETE FROM pgsketch.rollup_defs r WHERE r.name = drop_rollup.name;
END $$;

-- refresh_begin as version 4 made it (create_rollup, also in the file, is
-- unchanged since).
\ir ../sql/rollups_v4.sql

DROP FUNCTION pgsketch.capture_reconcile(text);
DROP FUNCTION pgsketch.capture_remove(text);
DROP FUNCTION pgsketch.capture_check(text, timestamptz, timestamptz);
DROP FUNCTION pgsketch.max_dirty_buckets();
DROP FUNCTION pgsketch.capture_broken(text);
DROP FUNCTION pgsketch.capture_prepare(text);
DROP FUNCTION pgsketch.capture_bucket(pgsketch.rollup_defs, text, text);
DROP FUNCTION pgsketch.capture_local_bucket(pgsketch.rollup_defs, text, text);
DROP FUNCTION pgsketch.capture_function(text);
DROP FUNCTION pgsketch.capture_trigger(text, text);
DROP FUNCTION pgsketch.capture_rels(regclass);
DROP TABLE pgsketch.rollup_captured;
DROP TABLE pgsketch.rollup_dirty;
