-- pgsketch catalog objects, version 24: first-seen bookkeeping reads the
-- rows of a range of buckets by their bucket, as the refresh does.
--
-- In a time zone a bucket may start after some of its rows (where a
-- midnight happens twice, the day counts from the second) or before the
-- last rows of the one before it (where clocks go back half an hour, an
-- hour's bucket). Version 23 bounded the rows it read by their time: with
-- the watermark at such a second midnight, keys whose only rows lay in
-- the hour before it were neither in the tables (their bucket is the
-- watermark's) nor in the count after the watermark (their time is before
-- it), and a refresh from such a bucket lost them. Rollups in a zone other
-- than UTC have their bookkeeping built anew by their next refresh
-- (first_seen refuses until then).

-- first_seen_rows is the SQL condition that time expression t (of the
-- time column's type ttype) lies in a bucket of rollup d in [lo, hi)
-- (NULL: unbounded): a bound on the time, and in a time zone other than
-- UTC the bucket itself too, with a day's margin on the time (which an
-- index on it serves).
CREATE FUNCTION pgsketch.first_seen_rows(d pgsketch.rollup_defs, ttype text, t text, lo timestamptz, hi timestamptz)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN coalesce(nullif(concat_ws(' AND ',
        CASE WHEN lo IS NULL THEN NULL
             WHEN ttype = 'timestamp with time zone' AND NOT pgsketch.is_utc(d.time_zone)
                 THEN format('%1$s >= %2$s - interval ''1 day'' AND %3$s >= %2$s',
                             t, pgsketch.first_seen_bound(ttype, lo), pgsketch.first_seen_bucket(d, ttype, t))
             ELSE format('%s >= %s', t, pgsketch.first_seen_bound(ttype, lo)) END,
        CASE WHEN hi IS NULL THEN NULL
             WHEN ttype = 'timestamp with time zone' AND NOT pgsketch.is_utc(d.time_zone)
                 THEN format('%1$s < %2$s + interval ''1 day'' AND %3$s < %2$s',
                             t, pgsketch.first_seen_bound(ttype, hi), pgsketch.first_seen_bucket(d, ttype, t))
             ELSE format('%s < %s', t, pgsketch.first_seen_bound(ttype, hi)) END), ''), 'true');

-- first_seen_update (version 24): version 23's, reading the rows of the
-- buckets from x to the watermark (first_seen_rows).
ALTER FUNCTION pgsketch.first_seen_update(text, timestamptz) RENAME TO first_seen_update_v23;
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
        EXECUTE format('INSERT INTO %1$s (key, bucket) SELECT n.k, n.b FROM (SELECT s.%2$I AS k, %3$s AS b FROM %4$s s WHERE %5$s GROUP BY s.%2$I) n%6$s',
                       ft, f.key_column, pgsketch.first_seen_bucket(d, ttype, format('min(s.%I)', d.time_column)), src,
                       pgsketch.first_seen_rows(d, ttype, format('s.%I', d.time_column), x, d.watermark),
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

-- first_seen (version 24): version 23's, counting after the watermark the
-- rows of the buckets from it on (first_seen_rows).
ALTER FUNCTION pgsketch.first_seen(text, timestamptz, timestamptz) RENAME TO first_seen_v23;
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
            'WITH n AS MATERIALIZED (SELECT s.%1$I AS k, %2$s AS b FROM %3$s s WHERE %4$s GROUP BY s.%1$I)
             SELECT u.b, count(*) FROM (
                 SELECT n.b FROM n WHERE n.k IS NOT NULL AND NOT EXISTS (SELECT FROM pgsketch.%5$I p WHERE p.key = n.k)
                 UNION ALL
                 SELECT n.b FROM n WHERE n.k IS NULL AND NOT EXISTS (SELECT FROM pgsketch.%5$I p WHERE p.key IS NULL)) u
              WHERE ($1 IS NULL OR u.b >= $1) AND ($2 IS NULL OR u.b < $2)
              GROUP BY u.b',
            f.key_column, bk, src, pgsketch.first_seen_rows(d, ttype, format('s.%I', d.time_column), d.watermark, NULL),
            pgsketch.first_seen_table(r))
            USING lo, hi;
    END IF;
END $$;

COMMENT ON FUNCTION pgsketch.first_seen(text, timestamptz, timestamptz) IS
    'per bucket of [lo, hi), the number of keys of rollup r''s source whose first row is in it; 55000 where its first-seen bookkeeping cannot say exactly';

UPDATE pgsketch.rollup_first_seen f SET built_version = NULL
  FROM pgsketch.rollup_defs d
 WHERE d.name = f.rollup AND NOT pgsketch.is_utc(d.time_zone);
