-- Removes version 18. The buckets of every inserted row are logged as
-- changed first (version 17 reads them from the source whole), then the
-- tables of inserted rows are dropped and every function goes back to its
-- version 17 form; each rollup's capture function is written again from
-- version 12's capture_body, its record of the source following it where
-- it matched.

DO $do$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        CONTINUE WHEN to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r))) IS NULL;
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        EXECUTE format('INSERT INTO pgsketch.rollup_dirty (rollup, bucket) SELECT DISTINCT %L, x.pgsketch_bucket FROM pgsketch.%I x',
                       r, pgsketch.inserts_table(r));
    END LOOP;
END $do$;

DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v16() RENAME TO catalog;
DROP FUNCTION pgsketch.capture_check(text, timestamptz, timestamptz);
ALTER FUNCTION pgsketch.capture_check_inserts(text, timestamptz, timestamptz) RENAME TO capture_check;
COMMENT ON FUNCTION pgsketch.capture_check(text, timestamptz, timestamptz) IS NULL;
DROP FUNCTION pgsketch.refresh_finish(text, timestamptz, boolean);
ALTER FUNCTION pgsketch.refresh_finish_v1(text, timestamptz, boolean) RENAME TO refresh_finish;
DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v13(text, boolean, text, text, integer) RENAME TO refresh_begin;
DROP FUNCTION pgsketch.capture_prepare(text);
ALTER FUNCTION pgsketch.capture_prepare_v11(text) RENAME TO capture_prepare;
DROP FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text);
ALTER FUNCTION pgsketch.capture_body_v12(pgsketch.rollup_defs, text) RENAME TO capture_body;

DO $do$
DECLARE
    r text;
    same oid[];
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        CONTINUE WHEN to_regprocedure(pgsketch.capture_function(r) || '()') IS NULL;
        CONTINUE WHEN pgsketch.distributed((SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table))
                                              FROM pgsketch.rollup_defs d WHERE d.name = r));
        same := ARRAY(SELECT c.relid FROM pgsketch.rollup_captured c
                       WHERE c.rollup = r
                         AND c.fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                                 ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns'))));
        BEGIN
            IF pgsketch.capture_define(r) THEN
                UPDATE pgsketch.rollup_captured c
                   SET fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                         ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns')))
                 WHERE c.rollup = r AND c.relid = ANY (same);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgsketch: the capture function of rollup % keeps its version 18 form until its next refresh: %', r, SQLERRM;
        END;
    END LOOP;
END $do$;

-- The tables of inserted rows go last: the functions written above no
-- longer name them.
DO $do$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        EXECUTE format('DROP TABLE IF EXISTS pgsketch.%I', pgsketch.inserts_table(r));
    END LOOP;
END $do$;

-- The view without inserted_rows (version 8's).
DROP VIEW pgsketch.rollups;
CREATE VIEW pgsketch.rollups AS
SELECT d.name,
       format('%I.%I', d.source_schema, d.source_table) AS source,
       format('%I.%I', d.rollup_schema, d.rollup_table) AS rollup_table,
       d.time_column,
       d.grain,
       d.time_zone,
       d.dimensions,
       (SELECT array_agg(CASE m.kind
                              WHEN 'hll' THEN format('%s: hll(%s) log2m=%s regwidth=%s', m.column_name, m.expression, m.log2m, m.regwidth)
                              WHEN 'theta' THEN format('%s: theta(%s) lg_k=%s', m.column_name, m.expression, m.log2m)
                              WHEN 'topk' THEN format('%s: topk(%s) size=%s', m.column_name, m.expression, 1 << m.log2m)
                              ELSE format('%s: %s(%s)', m.column_name, m.kind, m.expression) END
                         ORDER BY m.position)
          FROM pgsketch.rollup_measures m WHERE m.rollup = d.name) AS measures,
       d.watermark,
       d.rollup_rows AS rows,
       pg_total_relation_size(to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))) AS bytes,
       d.refreshed_at AS last_refresh,
       now() - d.watermark AS lag,
       d.version,
       pgsketch.capture_broken(d.name) AS capture_broken,
       (SELECT count(DISTINCT x.bucket) FROM pgsketch.rollup_dirty x WHERE x.rollup = d.name) AS dirty_buckets
  FROM pgsketch.rollup_defs d;
GRANT SELECT ON pgsketch.rollups TO PUBLIC;
COMMENT ON VIEW pgsketch.rollups IS 'Every pgsketch rollup with its source, grain, dimensions, measures, size and freshness';
DROP FUNCTION pgsketch.inserted_rows(text);
DROP FUNCTION pgsketch.protect_tables(text);
ALTER FUNCTION pgsketch.protect_tables_v11(text) RENAME TO protect_tables;
DROP FUNCTION pgsketch.capture_remove(text);
ALTER FUNCTION pgsketch.capture_remove_v12(text) RENAME TO capture_remove;
DROP FUNCTION pgsketch.inserts_define(text);
DROP FUNCTION pgsketch.inserts_columns(pgsketch.rollup_defs, regclass);
DROP FUNCTION pgsketch.inserts_table(text);
DROP FUNCTION pgsketch.inserts_max_rows();
