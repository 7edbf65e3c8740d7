-- pgsketch catalog objects, version 23: first-seen bookkeeping, the new
-- users per bucket.
--
-- "How many new users each day" is a small difference of two large sets,
-- where sketches of "users up to D" and "users before D" are too coarse to
-- subtract (docs/accuracy.md). Instead a rollup with first-seen on a key
-- column (a user) keeps, exactly:
--
-- * pgsketch.first_<rollup> (key, bucket): each key's first bucket, the
--   bucket of min(time column) over the source's rows of that key whose
--   bucket starts before the watermark (NULL keys are one key, as GROUP BY
--   makes them); and
-- * pgsketch.firstn_<rollup> (bucket, users): how many keys each bucket
--   holds first.
--
-- Whether a key's first bucket is b depends only on its rows in buckets up
-- to b. So a change in bucket x (a late row earlier than a key's first, a
-- deleted first row, an update moving one) can move first buckets at or
-- after x only, and a refresh that drains changes from x on recomputes
-- every key whose first bucket is x or later from the rows from x on
-- (keys first seen before x keep theirs): set-based SQL, a read of the
-- source from x to the watermark. x is the earliest bucket the refresh
-- rebuilds, which is never after a logged bucket it drains; a change
-- committed after the drain stays logged.
--
-- first_seen answers the counts of a range of whole buckets: from firstn
-- below the watermark, and from the source's rows from the watermark on
-- (keys absent from first_<rollup> are new there). It refuses (55000),
-- and the proxy then answers exactly, while a change is logged before the
-- range's end (or the watermark), while the change capture is not in
-- place, and until a refresh has built the tables at the rollup's
-- version. Both tables have the source's SELECT grants and the row-level
-- policy of the rollup's tables: a role reads them only while
-- require_source_read lets it.

-- rollup_first_seen lists the rollups that keep first-seen bookkeeping:
-- key_column is the key (a column the rollup reads); built_version the
-- rollup version the tables were last brought up to (NULL until the first
-- refresh after add_first_seen).
CREATE TABLE pgsketch.rollup_first_seen (
    rollup        text   PRIMARY KEY REFERENCES pgsketch.rollup_defs (name) ON DELETE CASCADE ON UPDATE CASCADE,
    key_column    text   NOT NULL,
    built_version bigint
);
COMMENT ON TABLE pgsketch.rollup_first_seen IS
    'pgsketch: rollups that keep each key''s first bucket (pgsketch.first_<rollup>) and the new keys per bucket (pgsketch.firstn_<rollup>)';
GRANT SELECT ON pgsketch.rollup_first_seen TO PUBLIC;

-- first_seen_table and first_seen_counts name rollup r's tables (in
-- schema pgsketch).
CREATE FUNCTION pgsketch.first_seen_table(r text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN 'first_' || r;
CREATE FUNCTION pgsketch.first_seen_counts(r text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN 'firstn_' || r;

-- first_seen_bucket is the SQL of the bucket of time expression t of
-- rollup d as the change log names it: an instant (for date and timestamp
-- columns the wall-clock start read as UTC).
CREATE FUNCTION pgsketch.first_seen_bucket(d pgsketch.rollup_defs, ttype text, t text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN CASE
        WHEN ttype = 'timestamp with time zone' AND d.grain = 'hour' AND NOT pgsketch.is_utc(d.time_zone)
            THEN format('date_trunc(''hour'', %s, %L)', t, d.time_zone)
        WHEN ttype = 'timestamp with time zone' THEN format('date_trunc(%L, %s, %L)', d.grain, t, d.time_zone)
        WHEN ttype = 'timestamp without time zone' THEN format('(date_trunc(%L, %s) AT TIME ZONE ''UTC'')', d.grain, t)
        ELSE format('(date_trunc(%L, (%s)::timestamp) AT TIME ZONE ''UTC'')', d.grain, t) END;

-- first_seen_bound is the literal of instant b (a bucket start as the
-- change log names it) in the time column's type ttype.
-- (Written out in UTC with its era, whatever the session's DateStyle;
-- infinite instants as such.)
CREATE FUNCTION pgsketch.first_seen_bound(ttype text, b timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN format('%L::%s',
        CASE WHEN b = 'infinity' THEN 'infinity'
             WHEN b = '-infinity' THEN '-infinity'
             WHEN ttype = 'timestamp with time zone'
                 THEN to_char(b AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00 ' || to_char(b AT TIME ZONE 'UTC', 'BC')
             WHEN ttype = 'timestamp without time zone'
                 THEN to_char(b AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US BC')
             ELSE to_char(b AT TIME ZONE 'UTC', 'YYYY-MM-DD BC') END,
        CASE ttype WHEN 'timestamp with time zone' THEN 'timestamptz' WHEN 'timestamp without time zone' THEN 'timestamp' ELSE 'date' END);

-- first_seen_floor is the start of rollup d's bucket holding instant t
-- (for date and timestamp columns, of wall-clock time t read as UTC), as
-- the change log names buckets.
CREATE FUNCTION pgsketch.first_seen_floor(d pgsketch.rollup_defs, ttype text, t timestamptz) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE
    RETURN CASE
        WHEN ttype = 'timestamp with time zone' AND d.grain = 'hour' AND NOT pgsketch.is_utc(d.time_zone)
            THEN date_trunc('hour', t, d.time_zone)
        WHEN ttype = 'timestamp with time zone' THEN date_trunc(d.grain, t, d.time_zone)
        ELSE date_trunc(d.grain, t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' END;

-- first_seen_define makes rollup r's first-seen tables for key column
-- col of source src (dropping them first if they exist): the key table
-- with the key's type and collation, the counts table, and the counts
-- table's row (infinity, 0): the version the tables were built at, which
-- no version is (first_seen_update sets it). The first-seen tables are
-- only ever emptied by DELETE: a snapshot from before a refresh then reads
-- the rows it should; a table made anew is one such a snapshot sees
-- empty, without the row of its version, and first_seen refuses it.
CREATE FUNCTION pgsketch.first_seen_define(r text, src regclass, col text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ktype text;
    kcoll oid;
BEGIN
    SELECT format_type(a.atttypid, a.atttypmod), a.attcollation INTO ktype, kcoll
      FROM pg_attribute a WHERE a.attrelid = src AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF to_regclass(format('pgsketch.%I', pgsketch.first_seen_table(r))) IS NOT NULL THEN
        EXECUTE format('DROP TABLE pgsketch.%I', pgsketch.first_seen_table(r));
    END IF;
    IF to_regclass(format('pgsketch.%I', pgsketch.first_seen_counts(r))) IS NOT NULL THEN
        EXECUTE format('DROP TABLE pgsketch.%I', pgsketch.first_seen_counts(r));
    END IF;
    EXECUTE format('CREATE TABLE pgsketch.%I (key %s%s, bucket timestamptz NOT NULL, CONSTRAINT %I UNIQUE NULLS NOT DISTINCT (key))',
                   pgsketch.first_seen_table(r), ktype,
                   CASE WHEN kcoll <> 0 THEN format(' COLLATE %s', (SELECT format('%I.%I', n.nspname, c.collname)
                                                                       FROM pg_collation c JOIN pg_namespace n ON n.oid = c.collnamespace
                                                                      WHERE c.oid = kcoll)) ELSE '' END,
                   pgsketch.first_seen_table(r) || '_key');
    EXECUTE format('CREATE INDEX ON pgsketch.%I (bucket)', pgsketch.first_seen_table(r));
    EXECUTE format('CREATE TABLE pgsketch.%I (bucket timestamptz PRIMARY KEY, users bigint NOT NULL)', pgsketch.first_seen_counts(r));
    EXECUTE format('INSERT INTO pgsketch.%I VALUES (''infinity'', 0)', pgsketch.first_seen_counts(r));
END $$;

-- add_first_seen makes rollup r keep first-seen bookkeeping of key column
-- col; the next refresh builds it. Only the rollup table's owner may, col
-- must be a column the rollup reads (its changes are then captured), and
-- the source may not be distributed by Citus.
CREATE FUNCTION pgsketch.add_first_seen(r text, col text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    dst regclass;
    ktype text;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    dst := to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table));
    PERFORM pgsketch.raise_unless(src IS NOT NULL AND dst IS NOT NULL, '42P01',
        format('the source or the table of rollup %L does not exist', r));
    PERFORM pgsketch.raise_unless(pg_has_role((SELECT relowner FROM pg_class WHERE oid = dst), 'USAGE'), '42501',
        format('must be the owner of rollup table %s to add first-seen bookkeeping to rollup %L', dst, r));
    PERFORM pgsketch.raise_unless(NOT EXISTS (SELECT FROM pgsketch.rollup_first_seen f WHERE f.rollup = r), '42710',
        format('rollup %L already keeps first-seen bookkeeping', r),
        format('Remove it first: SELECT pgsketch.drop_first_seen(%L).', r));
    PERFORM pgsketch.raise_unless(NOT pgsketch.distributed(src), '0A000',
        format('%s is distributed by Citus: first-seen bookkeeping is not supported on such sources yet', src));
    SELECT format_type(a.atttypid, a.atttypmod) INTO ktype
      FROM pg_attribute a WHERE a.attrelid = src AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    PERFORM pgsketch.raise_unless(ktype IS NOT NULL, '42703', format('column %I of %s does not exist', col, src));
    PERFORM pgsketch.raise_unless(col = ANY (pgsketch.read_columns(d)), '22023',
        format('rollup %L does not read column %I, so its changes would not be captured', r, col),
        'Give the rollup a measure of the column (rollup create --hll COL) and add first-seen to that rollup.');
    PERFORM pgsketch.raise_unless(col <> d.time_column, '22023',
        format('the first-seen key cannot be the time column %I', col));
    PERFORM pgsketch.first_seen_define(r, src, col);
    INSERT INTO pgsketch.rollup_first_seen (rollup, key_column) VALUES (r, col);
    PERFORM pgsketch.protect_tables(r);
END $$;

-- drop_first_seen removes rollup r's first-seen bookkeeping (nothing when
-- it has none).
CREATE FUNCTION pgsketch.drop_first_seen(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    EXECUTE format('DROP TABLE IF EXISTS pgsketch.%I, pgsketch.%I', pgsketch.first_seen_table(r), pgsketch.first_seen_counts(r));
    DELETE FROM pgsketch.rollup_first_seen f WHERE f.rollup = r;
END $$;

-- drop_rollup (version 23): version 6's, and the first-seen bookkeeping
-- goes too. (Written whole: version 6's body names its parameters by the
-- function's name.)
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
    IF EXISTS (SELECT FROM pgsketch.rollup_first_seen f WHERE f.rollup = drop_rollup.name) THEN
        PERFORM pgsketch.drop_first_seen(name);
    END IF;
    PERFORM pgsketch.capture_remove(name);
    FOR l IN SELECT * FROM pgsketch.rollup_levels x WHERE x.rollup = drop_rollup.name LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I.%I', l.table_schema, l.table_name);
    END LOOP;
    EXECUTE format('DROP TABLE IF EXISTS %I.%I', d.rollup_schema, d.rollup_table);
    DELETE FROM pgsketch.rollup_defs r WHERE r.name = drop_rollup.name;
END $$;

-- protect_tables (version 23): version 18's, then the first-seen tables
-- get the source's SELECT grants and the same policy.
ALTER FUNCTION pgsketch.protect_tables(text) RENAME TO protect_tables_v18;
CREATE FUNCTION pgsketch.protect_tables(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t regclass;
    src regclass := (SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table))
                       FROM pgsketch.rollup_defs d WHERE d.name = r);
BEGIN
    PERFORM pgsketch.protect_tables_v18(r);
    FOR t IN SELECT x FROM unnest(ARRAY[to_regclass(format('pgsketch.%I', pgsketch.first_seen_table(r))),
                                        to_regclass(format('pgsketch.%I', pgsketch.first_seen_counts(r)))]) x
              WHERE x IS NOT NULL LOOP
        IF NOT pg_has_role((SELECT relowner FROM pg_class WHERE oid = t), 'USAGE') THEN
            RAISE WARNING 'pgsketch: cannot protect % of rollup % with row-level security: only its owner can', t, r;
            CONTINUE;
        END IF;
        IF src IS NOT NULL THEN
            PERFORM pgsketch.copy_select_grants(src, t);
        END IF;
        CONTINUE WHEN (SELECT relrowsecurity FROM pg_class WHERE oid = t)
            AND EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = t AND p.polname = 'pgsketch_source_readers');
        IF EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = t AND p.polname = 'pgsketch_source_readers') THEN
            EXECUTE format('DROP POLICY pgsketch_source_readers ON %s', t);
        END IF;
        EXECUTE format('CREATE POLICY pgsketch_source_readers ON %s FOR SELECT TO PUBLIC USING ((SELECT pgsketch.require_source_read(%L)))', t, r);
        EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
    END LOOP;
END $$;

-- first_seen_update brings rollup r's first-seen tables up to the
-- refresh in progress: every key whose first bucket is at or after x
-- (all, for NULL, or when the key column's type or collation changed) is
-- recomputed from the source's rows from x to the watermark.
CREATE FUNCTION pgsketch.first_seen_update(r text, x timestamptz) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    f pgsketch.rollup_first_seen;
    src regclass;
    ttype text;
    ft text := format('pgsketch.%I', pgsketch.first_seen_table(r));
    fn text := format('pgsketch.%I', pgsketch.first_seen_counts(r));
    ktype text;
    kcoll oid;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    SELECT * INTO f FROM pgsketch.rollup_first_seen WHERE rollup = r;
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    ttype := pgsketch.base_type(src, d.time_column);
    SELECT format_type(a.atttypid, a.atttypmod), a.attcollation INTO ktype, kcoll
      FROM pg_attribute a WHERE a.attrelid = src AND a.attname = f.key_column AND a.attnum > 0 AND NOT a.attisdropped;
    PERFORM pgsketch.raise_unless(ktype IS NOT NULL, '42703',
        format('the first-seen key %I of rollup %L is no longer a column of %s', f.key_column, r, src),
        format('Remove the bookkeeping: SELECT pgsketch.drop_first_seen(%L).', r));
    IF (SELECT ROW(format_type(a.atttypid, a.atttypmod), a.attcollation) FROM pg_attribute a
         WHERE a.attrelid = to_regclass(ft) AND a.attname = 'key' AND NOT a.attisdropped) IS DISTINCT FROM ROW(ktype, kcoll)
       OR to_regclass(fn) IS NULL THEN
        -- The key's type or collation changed (or a table is gone): the
        -- tables are made anew, waiting for their locks no longer than
        -- pgsketch's DDL may, and every key is read again.
        PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
        PERFORM pgsketch.first_seen_define(r, src, f.key_column);
        PERFORM pgsketch.protect_tables(r);
        x := NULL;
    END IF;
    IF x IS NULL THEN
        EXECUTE format('DELETE FROM %s', ft);
        EXECUTE format('DELETE FROM %s', fn);
    ELSE
        EXECUTE format('DELETE FROM %s WHERE bucket >= $1', ft) USING x;
        EXECUTE format('DELETE FROM %s WHERE bucket >= $1', fn) USING x;
    END IF;
    IF d.watermark IS NOT NULL THEN
        -- Keys the table holds (first seen before x) are left out by an
        -- anti-join, which PostgreSQL runs as one merge or hash join
        -- (0.6 times the time of ON CONFLICT probing each key, measured);
        -- ON CONFLICT is left for the NULL key, which = does not match.
        -- (From nothing, the table is empty: neither is needed.)
        EXECUTE format('INSERT INTO %1$s (key, bucket) SELECT n.k, n.b FROM (SELECT s.%2$I AS k, %3$s AS b FROM %4$s s WHERE s.%5$I < %6$s%7$s GROUP BY s.%2$I) n%8$s',
                       ft, f.key_column, pgsketch.first_seen_bucket(d, ttype, format('min(s.%I)', d.time_column)), src,
                       d.time_column, pgsketch.first_seen_bound(ttype, d.watermark),
                       CASE WHEN x IS NULL THEN '' ELSE format(' AND s.%I >= %s', d.time_column, pgsketch.first_seen_bound(ttype, x)) END,
                       CASE WHEN x IS NULL THEN '' ELSE format(' WHERE NOT EXISTS (SELECT FROM %s p WHERE p.key = n.k) ON CONFLICT (key) DO NOTHING', ft) END);
        IF x IS NULL THEN
            EXECUTE format('INSERT INTO %s (bucket, users) SELECT bucket, count(*) FROM %s GROUP BY bucket', fn, ft);
        ELSE
            EXECUTE format('INSERT INTO %s (bucket, users) SELECT bucket, count(*) FROM %s WHERE bucket >= $1 GROUP BY bucket', fn, ft)
                USING x;
        END IF;
    END IF;
    EXECUTE format('INSERT INTO %s VALUES (''infinity'', $1) ON CONFLICT (bucket) DO UPDATE SET users = EXCLUDED.users', fn) USING d.version;
    UPDATE pgsketch.rollup_first_seen SET built_version = d.version WHERE rollup = r;
END $$;

-- refresh_finish (version 23): version 18's, then the first-seen tables:
-- recomputed from lo, the earliest bucket the refresh rebuilt (every
-- logged bucket it drained is lo or later: refresh_begin moves lo back
-- to the earliest), or whole for a full refresh or tables not built at
-- the rollup's last version.
ALTER FUNCTION pgsketch.refresh_finish(text, timestamptz, boolean) RENAME TO refresh_finish_v18;
CREATE FUNCTION pgsketch.refresh_finish(r text, lo timestamptz, ranged boolean)
    RETURNS TABLE (version bigint, watermark timestamptz, rollup_rows bigint)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f pgsketch.rollup_first_seen;
    was bigint := (SELECT d.version FROM pgsketch.rollup_defs d WHERE d.name = r);
BEGIN
    SELECT * INTO version, watermark, rollup_rows FROM pgsketch.refresh_finish_v18(r, lo, ranged);
    SELECT * INTO f FROM pgsketch.rollup_first_seen WHERE rollup = r;
    IF FOUND THEN
        PERFORM pgsketch.first_seen_update(r, CASE WHEN f.built_version IS NOT DISTINCT FROM was THEN lo END);
    END IF;
    RETURN NEXT;
END $$;

-- first_seen returns, per bucket of [lo, hi) (NULL: unbounded), how many
-- keys of rollup r's source have their first row in it (only buckets that
-- have some). lo and hi must be bucket starts as the change log names
-- them. It fails with 55000 where the bookkeeping cannot answer exactly
-- (and the proxy answers from the source), with 42501 where the role may
-- not read the source.
CREATE FUNCTION pgsketch.first_seen(r text, lo timestamptz, hi timestamptz)
    RETURNS TABLE (bucket timestamptz, users bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    f pgsketch.rollup_first_seen;
    src regclass;
    ttype text;
    why text;
    upto timestamptz;
    tbl regclass;
    pending boolean;
    bk text;
    built bigint;
BEGIN
    PERFORM pgsketch.require_source_read(r);
    SELECT * INTO d FROM pgsketch.rollup_defs x WHERE x.name = r;
    SELECT * INTO f FROM pgsketch.rollup_first_seen x WHERE x.rollup = r;
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    ttype := pgsketch.base_type(src, d.time_column);
    why := CASE
        WHEN f.rollup IS NULL THEN 'it keeps no first-seen bookkeeping'
        WHEN f.built_version IS DISTINCT FROM d.version THEN 'its first-seen bookkeeping is built by the next refresh'
        ELSE pgsketch.capture_broken(r) END;
    IF why IS NULL AND (lo <> pgsketch.first_seen_floor(d, ttype, lo) OR hi <> pgsketch.first_seen_floor(d, ttype, hi)) THEN
        why := format('the range does not start and end on %s buckets', d.grain);
    END IF;
    IF why IS NULL THEN
        -- The counts table this snapshot reads must be the one built at
        -- the version it sees (a table made anew since reads as empty).
        EXECUTE format('SELECT c.users FROM pgsketch.%I c WHERE c.bucket = ''infinity''', pgsketch.first_seen_counts(r)) INTO built;
        IF built IS DISTINCT FROM d.version THEN
            why := 'its first-seen tables were made anew after this statement''s snapshot';
        END IF;
    END IF;
    -- Every first bucket before upto must be exact: no change logged before it.
    upto := CASE WHEN hi IS NULL OR hi > d.watermark THEN d.watermark ELSE hi END;
    IF why IS NULL AND EXISTS (SELECT FROM pgsketch.rollup_dirty x WHERE x.rollup = r AND x.bucket < upto) THEN
        why := 'its source changed before the end of the range since its last refresh';
    END IF;
    tbl := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
    IF why IS NULL AND tbl IS NOT NULL THEN
        EXECUTE format('SELECT EXISTS (SELECT FROM %s x WHERE x.pgsketch_bucket < $1)', tbl) INTO pending USING upto;
        IF pending THEN
            why := 'rows were inserted before the end of the range since its last refresh';
        END IF;
    END IF;
    IF why IS NULL AND lo IS NULL AND hi IS NULL
       AND NOT (SELECT a.attnotnull FROM pg_attribute a WHERE a.attrelid = src AND a.attname = d.time_column) THEN
        -- Keys whose rows all have no time have no first bucket: the
        -- answer would lack their group.
        EXECUTE format('SELECT EXISTS (SELECT FROM %s s WHERE s.%I IS NULL)', src, d.time_column) INTO pending;
        IF pending THEN
            why := format('rows of %s have no %I', src, d.time_column);
        END IF;
    END IF;
    IF why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format('pgsketch: first-seen of rollup %s not used: %s', r, why),
            HINT = CASE WHEN why LIKE 'the range %' OR why LIKE 'rows of %' OR why LIKE 'it keeps %' THEN ''
                        ELSE format('SELECT pgsketch.refresh_rollup(%L) through pgsketch-proxy brings it up to date.', r) END;
    END IF;
    RETURN QUERY EXECUTE format('SELECT c.bucket, c.users FROM pgsketch.%I c WHERE ($1 IS NULL OR c.bucket >= $1) AND c.bucket < $2',
                                pgsketch.first_seen_counts(r))
        USING lo, upto;
    IF hi IS NULL OR hi > d.watermark THEN
        -- Keys first seen from the watermark on: their rows there, less
        -- the keys seen before it.
        bk := pgsketch.first_seen_bucket(d, ttype, format('min(s.%I)', d.time_column));
        RETURN QUERY EXECUTE format(
            'WITH n AS MATERIALIZED (SELECT s.%1$I AS k, %2$s AS b FROM %3$s s WHERE s.%4$I >= %5$s GROUP BY s.%1$I)
             SELECT u.b, count(*) FROM (
                 SELECT n.b FROM n WHERE n.k IS NOT NULL AND NOT EXISTS (SELECT FROM pgsketch.%6$I p WHERE p.key = n.k)
                 UNION ALL
                 SELECT n.b FROM n WHERE n.k IS NULL AND NOT EXISTS (SELECT FROM pgsketch.%6$I p WHERE p.key IS NULL)) u
              WHERE ($1 IS NULL OR u.b >= $1) AND ($2 IS NULL OR u.b < $2)
              GROUP BY u.b',
            f.key_column, bk, src, d.time_column, pgsketch.first_seen_bound(ttype, d.watermark), pgsketch.first_seen_table(r))
            USING lo, hi;
    END IF;
END $$;
COMMENT ON FUNCTION pgsketch.first_seen(text, timestamptz, timestamptz) IS
    'per bucket of [lo, hi), the number of keys of rollup r''s source whose first row is in it; 55000 where its first-seen bookkeeping cannot say exactly';

-- catalog (version 23): version 21's, and per rollup first_seen: its
-- first-seen key column and whether the tables are built at its version,
-- or null.
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v21;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    SET jit = off
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object('first_seen',
               (SELECT jsonb_build_object('key', f.key_column, 'built', f.built_version IS NOT DISTINCT FROM d.version)
                  FROM pgsketch.rollup_first_seen f JOIN pgsketch.rollup_defs d ON d.name = f.rollup
                 WHERE f.rollup = c.r->>'name')))::json ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v21()) WITH ORDINALITY AS c(r, o));
