-- pgsketch catalog objects, version 19: each table of inserted rows is
-- indexed by bucket and inserting transaction (pgsketch_bucket,
-- pgsketch_xid) instead of by bucket alone, so that a pgsketch-proxy that
-- keeps the inserted rows of a range it read can read those inserted
-- since (transactions its snapshot did not see, all at or after the
-- snapshot's xmin) from the index alone. The index replaces the old one,
-- so that a write adds no index entry it did not add before. A TRUNCATE
-- logs the buckets of the inserted rows too (capture_body), and a refresh
-- takes the snapshot that decides which inserted rows it read before it
-- lists their buckets (refresh_begin).

-- inserts_index is the index every table of inserted rows has.
CREATE FUNCTION pgsketch.inserts_index(tbl regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    old regclass;
BEGIN
    FOR old IN SELECT i.indexrelid::regclass FROM pg_index i
                WHERE i.indrelid = tbl
                  AND NOT (i.indnatts = 2 AND i.indexprs IS NULL AND i.indpred IS NULL
                           AND i.indkey[0] = (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = 'pgsketch_bucket')
                           AND i.indkey[1] = (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = 'pgsketch_xid')) LOOP
        EXECUTE format('DROP INDEX %s', old);
    END LOOP;
    IF NOT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = tbl) THEN
        EXECUTE format('CREATE INDEX ON %s (pgsketch_bucket, pgsketch_xid)', tbl);
    END IF;
END $$;

-- inserts_define (version 19): version 18's, with the table's index made
-- by inserts_index.
ALTER FUNCTION pgsketch.inserts_define(text) RENAME TO inserts_define_v18;
CREATE FUNCTION pgsketch.inserts_define(r text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    made boolean := pgsketch.inserts_define_v18(r);
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
BEGIN
    IF tbl IS NOT NULL THEN
        PERFORM pgsketch.inserts_index(tbl);
    END IF;
    RETURN made;
END $$;

-- Every table of inserted rows gets the new index, one rollup at a time
-- under its lock, waiting for the table no longer than DDL of pgsketch's
-- may (a rollup whose table is busy keeps the old index, and gets the new
-- one when its next refresh defines the table).
DO $do$
DECLARE
    r text;
    tbl regclass;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        tbl := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
        CONTINUE WHEN tbl IS NULL;
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        BEGIN
            PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
            PERFORM pgsketch.inserts_index(tbl);
        EXCEPTION WHEN lock_not_available THEN
            RAISE WARNING 'pgsketch: the inserted rows of rollup % keep their old index until its next refresh: %', r, SQLERRM;
        END;
    END LOOP;
END $do$;

-- capture_body (version 19): version 18's, with a TRUNCATE logging the
-- buckets of the rollup's inserted rows too, not only those of its rollup
-- rows: a row inserted into a bucket the rollup held no row of was left
-- for the answers to add after the TRUNCATE had removed it.
ALTER FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text) RENAME TO capture_body_v18;
CREATE FUNCTION pgsketch.capture_body(d pgsketch.rollup_defs, ttype text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body text := pgsketch.capture_body_v18(d, ttype);
    bucket text := CASE ttype WHEN 'timestamp with time zone' THEN 'bucket' ELSE '(bucket::timestamp AT TIME ZONE ''UTC'')' END;
    truncated text := format('SELECT array_agg(DISTINCT %s) INTO buckets FROM %I.%I;', bucket, d.rollup_schema, d.rollup_table);
BEGIN
    IF to_regclass(format('pgsketch.%I', pgsketch.inserts_table(d.name))) IS NULL THEN
        RETURN body;
    END IF;
    IF strpos(body, truncated) = 0 THEN
        RAISE EXCEPTION 'pgsketch: the capture function of rollup % has no TRUNCATE branch to extend', d.name;
    END IF;
    RETURN replace(body, truncated,
                   format('SELECT array_agg(DISTINCT u.b) INTO buckets FROM (SELECT %s FROM %I.%I UNION ALL SELECT x.pgsketch_bucket FROM pgsketch.%I x) AS u(b);',
                          bucket, d.rollup_schema, d.rollup_table, pgsketch.inserts_table(d.name)));
END $$;

-- capture_rewrite writes rollup r's capture function again from the
-- current capture_body, under the rollup's lock: where the old function
-- matched the definition the last refresh recorded, the record follows the
-- new one. A rollup without a capture function, or over a distributed
-- source, is left alone; one whose function cannot be written keeps it
-- (its form of version was, said in a warning) until its next refresh.
CREATE FUNCTION pgsketch.capture_rewrite(r text, was text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    same oid[];
BEGIN
    IF to_regprocedure(pgsketch.capture_function(r) || '()') IS NULL
       OR pgsketch.distributed((SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table))
                                  FROM pgsketch.rollup_defs d WHERE d.name = r)) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
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
        RAISE WARNING 'pgsketch: the capture function of rollup % keeps its version % form until its next refresh: %', r, was, SQLERRM;
    END;
END $$;

-- Every rollup's capture function is written again in the new form.
SELECT pgsketch.capture_rewrite(name, '18') FROM pgsketch.rollup_defs ORDER BY name;

-- refresh_begin (version 19): version 18's, with the snapshot that decides
-- which inserted rows the refresh's read saw taken first, before the
-- buckets of the inserted rows are listed. Version 18 took it last, after
-- the change log was drained: a row committed in between, into a bucket
-- the refresh did not rebuild but at or after the oldest one it did, was
-- seen by that snapshot, so refresh_finish deleted it, and no rollup row
-- held it (a red team's writers racing refreshes saw a count short). Now
-- every row the snapshot sees is seen by the listing too, so its bucket is
-- logged, drained and rebuilt, and read by the refresh (whose read comes
-- later still).
ALTER FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer) RENAME TO refresh_begin_v18;
CREATE FUNCTION pgsketch.refresh_begin(r text, full_rebuild boolean DEFAULT false,
                                       from_time text DEFAULT NULL, to_time text DEFAULT NULL,
                                       parts integer DEFAULT 1)
    RETURNS TABLE (lo timestamptz, hi timestamptz, read_sql text[], ndims integer, fields text[], write_sql text,
                   ranged boolean, bucket_zone text, time_kind text, grain text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seen text := pg_current_snapshot()::text;
    drain jsonb;
BEGIN
    SELECT * INTO lo, hi, read_sql, ndims, fields, write_sql, ranged, bucket_zone, time_kind, grain
      FROM pgsketch.refresh_begin_v18(r, full_rebuild, from_time, to_time, parts);
    drain := nullif(current_setting('pgsketch.inserts_drain', true), '')::jsonb;
    IF drain IS NOT NULL THEN
        PERFORM set_config('pgsketch.inserts_drain', jsonb_set(drain, '{snapshot}', to_jsonb(seen))::text, true);
    END IF;
    RETURN NEXT;
END $$;
