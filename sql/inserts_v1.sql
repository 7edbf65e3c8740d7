-- pgsketch catalog objects, version 18: rows inserted since a refresh are
-- kept beside the rollup, so that a bucket that only gained rows is
-- answered from its rollup rows and those rows instead of being read again
-- from the source.
--
-- * Each rollup has a table of inserted rows, pgsketch.inserts_<rollup>:
--   pgsketch_xid, the inserting transaction's id, pgsketch_bucket, the
--   bucket the row belongs to (as the change log names buckets), and the
--   columns the rollup reads, as the source declares them (type, modifier,
--   collation). A rollup reading a column of one of the first two names
--   has no such table; its inserts are logged as changed buckets.
-- * The INSERT trigger of a statement whose rows all have a finite time
--   before the open bucket (the one holding now(), never materialized),
--   and are at most inserts_max_rows(), copies them there instead of
--   logging their buckets in pgsketch.rollup_dirty, in the writer's
--   transaction. UPDATE, DELETE, TRUNCATE and larger inserts log buckets
--   as before; a logged bucket is read from the source whole, whatever
--   rows were inserted into it.
-- * A refresh rebuilds every bucket that has inserted rows. It deletes the
--   inserted rows of the buckets it rebuilt whose transactions its read
--   saw (pg_visible_in_snapshot against a snapshot taken before the read);
--   rows committed while it read, which it may or may not have seen, have
--   their buckets logged instead (read whole until the next refresh), so
--   that no row is counted twice and none is lost.
-- * An answering statement adds the inserted rows of the rollup's whole
--   buckets that the change log does not list to the rollup rows. The
--   check every such statement runs (capture_check) fails when the range
--   holds inserted rows, so that a pgsketch-proxy that does not read them
--   answers exactly; one that does calls capture_check_inserts.

-- inserts_max_rows is the most rows an INSERT statement may copy into the
-- inserted rows; a larger one (a bulk load) logs its buckets instead.
CREATE FUNCTION pgsketch.inserts_max_rows() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 10000;

-- inserts_table names rollup r's table of inserted rows (in schema
-- pgsketch).
CREATE FUNCTION pgsketch.inserts_table(r text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN 'inserts_' || r;

-- inserts_columns is the column list of rollup d's table of inserted rows
-- read from source src: each column the rollup reads with its type and
-- collation, in read_columns' order. The type has no modifier, so that any
-- value of it fits (a source column widened from varchar(5) to varchar(10)
-- since the table was made still copies into it).
CREATE FUNCTION pgsketch.inserts_columns(d pgsketch.rollup_defs, src regclass) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT string_agg(format('%I %s%s', a.attname, format_type(a.atttypid, NULL),
                                     CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                                          THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END),
                              ', ' ORDER BY c.i)
              FROM unnest(pgsketch.read_columns(d)) WITH ORDINALITY AS c(name, i)
              JOIN pg_attribute a ON a.attrelid = src AND a.attname = c.name AND a.attnum > 0 AND NOT a.attisdropped
              JOIN pg_type t ON t.oid = a.atttypid);

-- inserts_define creates rollup r's table of inserted rows, or creates it
-- anew when the columns the rollup reads changed (their type, modifier or
-- collation: the source's definition then differs from the one the last
-- refresh recorded, so the rollup is not answered from until a refresh
-- rebuilds it whole, which reads every row the table held). It returns
-- whether it created the table.
CREATE FUNCTION pgsketch.inserts_define(r text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    cols text;
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    cols := pgsketch.inserts_columns(d, src);
    IF cols IS NULL OR cardinality(pgsketch.read_columns(d)) <> (SELECT count(*) FROM unnest(pgsketch.read_columns(d)) c
                                                                WHERE pgsketch.base_type(src, c) IS NOT NULL)
       OR pgsketch.read_columns(d) && ARRAY['pgsketch_xid', 'pgsketch_bucket'] THEN
        -- A column the rollup reads is gone (the capture function cannot
        -- be made either, and the rollup is not answered from), or one is
        -- named as the table's own.
        RETURN false;
    END IF;
    cols := 'pgsketch_xid xid8 NOT NULL, pgsketch_bucket timestamptz NOT NULL, ' || cols;
    IF tbl IS NOT NULL THEN
        IF (SELECT obj_description(tbl, 'pg_class')) IS NOT DISTINCT FROM cols THEN
            RETURN false;
        END IF;
        EXECUTE format('DROP TABLE %s', tbl);
    END IF;
    EXECUTE format('CREATE TABLE pgsketch.%I (%s)', pgsketch.inserts_table(r), cols);
    tbl := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
    EXECUTE format('CREATE INDEX ON %s (pgsketch_bucket)', tbl);
    -- The column list it was made from, to compare with the next one.
    EXECUTE format('COMMENT ON TABLE %s IS %L', tbl, cols);
    RETURN true;
END $$;

-- capture_body (version 18): version 12's, an INSERT statement of at most
-- inserts_max_rows() rows, all with a finite time, copied into the
-- rollup's inserted rows instead of logged. The copy is outside the block
-- that traps errors, as the log's insert is: a write there would give
-- every such statement a subtransaction ID, and a transaction of more
-- than 64 of them makes every session's snapshots overflow their cache.
-- What could fail it is checked inside (the columns' types, against those
-- the function was written for; the table has no type modifiers).
ALTER FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text) RENAME TO capture_body_v12;
CREATE FUNCTION pgsketch.capture_body(d pgsketch.rollup_defs, ttype text) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN format($f$
DECLARE
    lo %9$s;
    hi %9$s;
    nrows bigint;
    ntimed bigint;
    copied boolean := false;
    buckets timestamptz[];
    failed text;
BEGIN
    -- No change log here: a copy of this trigger on a shard of a table
    -- Citus distributes, on a worker. Nothing to log, and nothing that
    -- may fail the write; the coordinator answers such a rollup exactly.
    IF to_regclass('pgsketch.rollup_defs') IS NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        IF TG_OP = 'TRUNCATE' THEN
            -- Every bucket the rollup holds.
            SELECT array_agg(DISTINCT %6$s) INTO buckets FROM %7$I.%8$I;
        ELSE
            IF TG_OP = 'INSERT' THEN
                SELECT min(x.%4$I), max(x.%4$I), count(*), count(x.%4$I) INTO lo, hi, nrows, ntimed FROM pgsketch_new x;
                -- A small statement whose rows all have a finite time
                -- before the open bucket (the one holding now(), which
                -- answers read from the table), and whose columns still
                -- have the types they had when this function was written
                -- (the copy below, outside this block, then cannot fail),
                -- is copied instead of logged.
                copied := nrows = ntimed AND nrows <= %18$s AND isfinite(lo) AND isfinite(hi) AND %16$s < %23$s
                          AND (SELECT %22$s FROM pgsketch_new n LIMIT 1);
                IF copied THEN
                    nrows := 0;
                END IF;
            ELSIF TG_OP = 'DELETE' THEN
                SELECT min(x.%4$I), max(x.%4$I), count(*) INTO lo, hi, nrows FROM pgsketch_old x;
            ELSE
                SELECT min(x.t), max(x.t), count(*) INTO lo, hi, nrows
                  FROM (SELECT o.%4$I FROM pgsketch_old o UNION ALL SELECT w.%4$I FROM pgsketch_new w) AS x(t);
            END IF;
            IF lo IS NULL OR nrows = 0 THEN
                buckets := NULL; -- no row with a time, or the rows copied: no bucket
            ELSIF %15$s = %16$s THEN
                -- The earliest and the latest row in one bucket (buckets
                -- never go back in time): every row is in it.
                buckets := ARRAY[%15$s];
            ELSIF nrows >= 1000 AND %10$s THEN
                SELECT array_agg(b AT TIME ZONE %11$L) INTO buckets FROM generate_series(%12$s, %13$s, %14$L::interval) AS b;
            ELSIF TG_OP = 'INSERT' THEN
                SELECT array_agg(DISTINCT %3$s) INTO buckets FROM pgsketch_new n WHERE n.%4$I IS NOT NULL;
            ELSIF TG_OP = 'DELETE' THEN
                SELECT array_agg(DISTINCT %5$s) INTO buckets FROM pgsketch_old o WHERE o.%4$I IS NOT NULL;
            ELSE
                SELECT array_agg(u.b) INTO buckets
                  FROM (SELECT %5$s FROM pgsketch_old o WHERE o.%4$I IS NOT NULL
                        UNION SELECT %3$s FROM pgsketch_new n WHERE n.%4$I IS NOT NULL) AS u(b);
            END IF;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS failed = MESSAGE_TEXT;
    END;
    IF failed IS NOT NULL THEN
        -- One fault marks the rollup until a refresh: the first is kept.
        INSERT INTO pgsketch.rollup_faults (rollup, relid, message)
        SELECT %2$L, TG_RELID, format('%%s on %%I.%%I: %%s', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, failed)
         WHERE NOT EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = %2$L);
    ELSIF copied THEN
        -- Rows the answers add to their buckets' rollup rows.
        INSERT INTO pgsketch.%19$I (pgsketch_xid, pgsketch_bucket, %20$s)
        SELECT pg_current_xact_id(), %3$s, %21$s FROM pgsketch_new n;
    ELSIF cardinality(buckets) = 1 THEN
        -- A statement of one bucket logs it once per transaction: the
        -- setting remembers the last bucket this transaction logged (a
        -- savepoint rolled back takes it back with the log row; a refresh
        -- that drains the log clears it).
        IF current_setting(%17$L, true) IS DISTINCT FROM extract(epoch FROM buckets[1])::text THEN
            INSERT INTO pgsketch.rollup_dirty (rollup, bucket) VALUES (%2$L, buckets[1]);
            PERFORM set_config(%17$L, extract(epoch FROM buckets[1])::text, true);
        END IF;
    ELSIF buckets IS NOT NULL THEN
        INSERT INTO pgsketch.rollup_dirty (rollup, bucket) SELECT %2$L, b FROM unnest(buckets) AS b;
    END IF;
    RETURN NULL;
END
$f$,
        NULL, d.name,
        pgsketch.capture_bucket(d, ttype, format('n.%I', d.time_column)), d.time_column,
        pgsketch.capture_bucket(d, ttype, format('o.%I', d.time_column)),
        CASE ttype WHEN 'timestamp with time zone' THEN 'bucket' ELSE '(bucket::timestamp AT TIME ZONE ''UTC'')' END,
        d.rollup_schema, d.rollup_table,
        ttype,
        CASE WHEN ttype = 'timestamp with time zone' AND d.grain = 'hour' AND NOT pgsketch.is_utc(d.time_zone) THEN 'false'
             ELSE format('isfinite(lo) AND isfinite(hi) AND %s < %s + 64 * %L::interval',
                         pgsketch.capture_local_bucket(d, ttype, 'hi'), pgsketch.capture_local_bucket(d, ttype, 'lo'),
                         '1 ' || d.grain) END,
        d.time_zone,
        pgsketch.capture_local_bucket(d, ttype, 'lo'), pgsketch.capture_local_bucket(d, ttype, 'hi'),
        '1 ' || d.grain,
        pgsketch.capture_bucket(d, ttype, 'lo'), pgsketch.capture_bucket(d, ttype, 'hi'),
        pgsketch.capture_logged_setting(d.name),
        pgsketch.inserts_max_rows(),
        pgsketch.inserts_table(d.name),
        (SELECT string_agg(format('%I', c), ', ' ORDER BY i) FROM unnest(pgsketch.read_columns(d)) WITH ORDINALITY AS x(c, i)),
        (SELECT string_agg(format('n.%I', c), ', ' ORDER BY i) FROM unnest(pgsketch.read_columns(d)) WITH ORDINALITY AS x(c, i)),
        (SELECT string_agg(format('pg_typeof(n.%I)::oid = %s', x.c, a.atttypid), ' AND ' ORDER BY x.i)
           FROM unnest(pgsketch.read_columns(d)) WITH ORDINALITY AS x(c, i)
           JOIN pg_attribute a ON a.attrelid = to_regclass(format('%I.%I', d.source_schema, d.source_table))
                              AND a.attname = x.c AND a.attnum > 0 AND NOT a.attisdropped),
        pgsketch.capture_bucket(d, ttype, CASE ttype WHEN 'timestamp with time zone' THEN 'now()'
                                                     WHEN 'date' THEN '(now() AT TIME ZONE ''UTC'')::date'
                                                     ELSE '(now() AT TIME ZONE ''UTC'')' END));

-- capture_prepare (version 18): the rollup's table of inserted rows first
-- (inserts_define), then version 11's, which writes the trigger function
-- that fills it.
ALTER FUNCTION pgsketch.capture_prepare(text) RENAME TO capture_prepare_v11;
CREATE FUNCTION pgsketch.capture_prepare(r text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    IF src IS NOT NULL AND NOT pgsketch.distributed(src) AND (SELECT relkind FROM pg_class WHERE oid = src) IN ('r', 'p') THEN
        PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
        PERFORM pgsketch.inserts_define(r);
    END IF;
    RETURN pgsketch.capture_prepare_v11(r);
END $$;

-- protect_tables (version 18): version 11's, then the table of inserted
-- rows, which holds the source's own values, gets the source's SELECT
-- grants (sync_grants, which calls this last, gives them to the rollup's
-- other tables) and the same policy: a role reads it only while
-- require_source_read lets it.
ALTER FUNCTION pgsketch.protect_tables(text) RENAME TO protect_tables_v11;
CREATE FUNCTION pgsketch.protect_tables(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t regclass := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
    src regclass := (SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table))
                       FROM pgsketch.rollup_defs d WHERE d.name = r);
BEGIN
    PERFORM pgsketch.protect_tables_v11(r);
    IF t IS NOT NULL AND src IS NOT NULL THEN
        PERFORM pgsketch.copy_select_grants(src, t);
    END IF;
    IF t IS NULL OR ((SELECT relrowsecurity FROM pg_class WHERE oid = t)
                     AND EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = t AND p.polname = 'pgsketch_source_readers')) THEN
        RETURN;
    END IF;
    IF NOT pg_has_role((SELECT relowner FROM pg_class WHERE oid = t), 'USAGE') THEN
        RAISE WARNING 'pgsketch: cannot protect % of rollup % with row-level security: only its owner can', t, r;
        RETURN;
    END IF;
    EXECUTE format('DROP POLICY IF EXISTS pgsketch_source_readers ON %s', t);
    EXECUTE format('CREATE POLICY pgsketch_source_readers ON %s FOR SELECT TO PUBLIC USING ((SELECT pgsketch.require_source_read(%L)))', t, r);
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
END $$;

-- refresh_begin (version 18): every bucket with inserted rows is logged
-- first, so that version 13's drains it with the log and rebuilds it; then
-- version 13's; then a snapshot, taken before anything is read, that
-- refresh_finish deletes the inserted rows the read saw by.
ALTER FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer) RENAME TO refresh_begin_v13;
CREATE FUNCTION pgsketch.refresh_begin(r text, full_rebuild boolean DEFAULT false,
                                       from_time text DEFAULT NULL, to_time text DEFAULT NULL,
                                       parts integer DEFAULT 1)
    RETURNS TABLE (lo timestamptz, hi timestamptz, read_sql text[], ndims integer, fields text[], write_sql text,
                   ranged boolean, bucket_zone text, time_kind text, grain text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
    moved timestamptz[];
    zhour boolean;
    cap timestamptz;
BEGIN
    IF tbl IS NOT NULL THEN
        EXECUTE format('SELECT array_agg(DISTINCT x.pgsketch_bucket) FROM %s x', tbl) INTO moved;
        INSERT INTO pgsketch.rollup_dirty (rollup, bucket) SELECT r, b FROM unnest(moved) AS b;
    END IF;
    SELECT * INTO lo, hi, read_sql, ndims, fields, write_sql, ranged, bucket_zone, time_kind, grain
      FROM pgsketch.refresh_begin_v13(r, full_rebuild, from_time, to_time, parts);
    IF tbl IS NOT NULL THEN
        -- The buckets this refresh rebuilds (refresh_begin_v13): a range
        -- refresh [lo, hi); any other every logged bucket before lo, then
        -- [lo, cap), cap the open bucket, which is not materialized.
        SELECT * INTO d FROM pgsketch.rollup_defs x WHERE x.name = r;
        zhour := pgsketch.base_type(to_regclass(format('%I.%I', d.source_schema, d.source_table)), d.time_column)
                     = 'timestamp with time zone' AND d.grain = 'hour' AND NOT pgsketch.is_utc(d.time_zone);
        IF NOT ranged THEN
            cap := CASE WHEN zhour THEN date_trunc('hour', now(), d.time_zone)
                        ELSE pgsketch.bucket_local(d.grain, now() AT TIME ZONE d.time_zone) AT TIME ZONE d.time_zone END;
        END IF;
        PERFORM set_config('pgsketch.inserts_drain', json_build_object(
            'snapshot', pg_current_snapshot()::text,
            'moved', coalesce(moved, '{}'),
            'lo', lo, 'hi', CASE WHEN ranged THEN hi ELSE cap END, 'ranged', ranged)::text, true);
    END IF;
    RETURN NEXT;
END $$;

-- refresh_finish (version 18): the inserted rows of the rebuilt buckets
-- that the refresh's read saw are deleted (their transactions were visible
-- in the snapshot refresh_begin took before the read); those of the
-- rebuilt buckets committed since, which the read may or may not have
-- seen, have their buckets logged; then version 1's.
ALTER FUNCTION pgsketch.refresh_finish(text, timestamptz, boolean) RENAME TO refresh_finish_v1;
CREATE FUNCTION pgsketch.refresh_finish(r text, lo timestamptz, ranged boolean)
    RETURNS TABLE (version bigint, watermark timestamptz, rollup_rows bigint)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
    drain jsonb := nullif(current_setting('pgsketch.inserts_drain', true), '')::jsonb;
    rebuilt text;
BEGIN
    IF tbl IS NOT NULL AND drain IS NOT NULL THEN
        rebuilt := concat_ws(' AND ',
            'true',
            CASE WHEN drain->>'lo' IS NOT NULL AND (drain->>'ranged')::boolean
                 THEN format('x.pgsketch_bucket >= %L::timestamptz', drain->>'lo') END,
            CASE WHEN drain->>'hi' IS NOT NULL THEN format('x.pgsketch_bucket < %L::timestamptz', drain->>'hi') END);
        IF drain->>'lo' IS NOT NULL AND NOT (drain->>'ranged')::boolean THEN
            rebuilt := format('(%s AND (x.pgsketch_bucket >= %L::timestamptz OR x.pgsketch_bucket = ANY (%L::timestamptz[])))',
                              rebuilt, drain->>'lo',
                              ARRAY(SELECT jsonb_array_elements_text(drain->'moved'))::timestamptz[]);
        END IF;
        EXECUTE format('DELETE FROM %s x WHERE %s AND pg_visible_in_snapshot(x.pgsketch_xid, %L::pg_snapshot)',
                       tbl, rebuilt, drain->>'snapshot');
        EXECUTE format('INSERT INTO pgsketch.rollup_dirty (rollup, bucket) SELECT DISTINCT %L, x.pgsketch_bucket FROM %s x WHERE %s',
                       r, tbl, rebuilt);
        PERFORM set_config('pgsketch.inserts_drain', '', true);
    END IF;
    RETURN QUERY SELECT * FROM pgsketch.refresh_finish_v1(r, lo, ranged);
END $$;

-- capture_check_inserts is capture_check for a statement that reads the
-- inserted rows of the range's buckets itself.
ALTER FUNCTION pgsketch.capture_check(text, timestamptz, timestamptz) RENAME TO capture_check_inserts;
COMMENT ON FUNCTION pgsketch.capture_check_inserts(text, timestamptz, timestamptz) IS
    'the number of logged buckets in [lo, hi) of rollup r, failing (42501, 55000) where the role may not read its source or its change capture is not in place';

-- capture_check (version 18): capture_check_inserts', failing also when
-- the range holds inserted rows, which the statement that calls it does
-- not read (a pgsketch-proxy older than this catalog).
CREATE FUNCTION pgsketch.capture_check(r text, lo timestamptz, hi timestamptz) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint := pgsketch.capture_check_inserts(r, lo, hi);
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
    pending boolean;
BEGIN
    IF tbl IS NOT NULL THEN
        EXECUTE format('SELECT EXISTS (SELECT FROM %s x WHERE ($1 IS NULL OR x.pgsketch_bucket >= $1) AND ($2 IS NULL OR x.pgsketch_bucket < $2))', tbl)
           INTO pending USING lo, hi;
        IF pending THEN
            RAISE EXCEPTION USING ERRCODE = '55000',
                MESSAGE = format('pgsketch: rollup %s not used: rows were inserted into its range since its last refresh, which this pgsketch-proxy does not read', r),
                HINT = 'Upgrade pgsketch-proxy to the version of the catalog (pgsketch-proxy migrate up), or refresh the rollup.';
        END IF;
    END IF;
    RETURN n;
END $$;

-- capture_remove (version 18): version 12's, then the table of inserted
-- rows goes too.
ALTER FUNCTION pgsketch.capture_remove(text) RENAME TO capture_remove_v12;
CREATE FUNCTION pgsketch.capture_remove(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
BEGIN
    PERFORM pgsketch.capture_remove_v12(r);
    PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
    EXECUTE format('DROP TABLE IF EXISTS pgsketch.%I', pgsketch.inserts_table(r));
END $$;

-- catalog (version 18): version 16's, and per rollup the name of its table
-- of inserted rows in schema pgsketch (inserts_table), or null while it
-- has none (until its first refresh under this version).
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v16;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    SET jit = off
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object(
               'inserts_table',
               CASE WHEN to_regclass(format('pgsketch.%I', pgsketch.inserts_table(c.r->>'name'))) IS NOT NULL
                    THEN pgsketch.inserts_table(c.r->>'name') END))::json
               ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v16()) WITH ORDINALITY AS c(r, o));

-- Every rollup gets its table of inserted rows and its capture function in
-- the new form, one rollup at a time under its lock (as version 12's
-- upgrade did): where the old function matched the definition the last
-- refresh recorded, the record follows the new one. A pgsketch-proxy that
-- loaded the catalog before keeps calling capture_check, which fails (the
-- statement is answered exactly) where inserted rows lie in the range.
DO $do$
DECLARE
    r text;
    same oid[];
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        CONTINUE WHEN to_regprocedure(pgsketch.capture_function(r) || '()') IS NULL;
        CONTINUE WHEN pgsketch.distributed((SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table))
                                              FROM pgsketch.rollup_defs d WHERE d.name = r));
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        same := ARRAY(SELECT c.relid FROM pgsketch.rollup_captured c
                       WHERE c.rollup = r
                         AND c.fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                                 ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns'))));
        BEGIN
            PERFORM pgsketch.inserts_define(r);
            PERFORM pgsketch.protect_tables(r);
            IF pgsketch.capture_define(r) THEN
                UPDATE pgsketch.rollup_captured c
                   SET fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                         ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns')))
                 WHERE c.rollup = r AND c.relid = ANY (same);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgsketch: rollup % keeps logging inserts as changed buckets until its next refresh: %', r, SQLERRM;
        END;
    END LOOP;
END $do$;

-- inserted_rows is the number of rows in rollup r's table of inserted rows
-- (0 without one).
CREATE FUNCTION pgsketch.inserted_rows(r text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
    n bigint := 0;
BEGIN
    IF tbl IS NOT NULL AND has_table_privilege(tbl, 'SELECT') THEN
        EXECUTE format('SELECT count(*) FROM %s', tbl) INTO n;
    END IF;
    RETURN n;
END $$;

-- rollups (version 18): version 8's, and the rows inserted since their
-- buckets were built (inserted_rows).
CREATE OR REPLACE VIEW pgsketch.rollups AS
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
       (SELECT count(DISTINCT x.bucket) FROM pgsketch.rollup_dirty x WHERE x.rollup = d.name) AS dirty_buckets,
       pgsketch.inserted_rows(d.name) AS inserted_rows
  FROM pgsketch.rollup_defs d;
