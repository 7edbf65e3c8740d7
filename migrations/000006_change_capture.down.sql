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

CREATE OR REPLACE FUNCTION pgsketch.refresh_begin(r text, full_rebuild boolean DEFAULT false,
                                       from_time text DEFAULT NULL, to_time text DEFAULT NULL,
                                       parts integer DEFAULT 1)
    RETURNS TABLE (lo timestamptz, hi timestamptz, read_sql text[], ndims integer, fields text[], write_sql text,
                   ranged boolean, bucket_zone text, time_kind text, grain text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    dst regclass;
    ttype text;
    g interval;
    lo_local timestamp;
    hi_local timestamp;
    v timestamptz;
    bucket_expr text;
    time_expr text;
    mtype oid;
    zoned boolean;
    zhour boolean;
    lo_text text;
    hi_text text;
    pred text := 'true';
    bpred text := 'true';
    dims text := '';
    m record;
    hll_cols text := '';
    lean_cols text := '';
    vcol text;
    part_cols text := '';
    flds text[] := '{}';
    has_hll boolean := false;
    has_part boolean := false;
    q text;
    pages bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    -- Read after the lock: a refresh that held it has committed by now.
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    dst := to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table));
    PERFORM pgsketch.raise_unless(src IS NOT NULL, '42P01',
        format('source table %I.%I of rollup %L does not exist', d.source_schema, d.source_table, r));
    PERFORM pgsketch.raise_unless(dst IS NOT NULL, '42P01',
        format('rollup table %I.%I of rollup %L does not exist', d.rollup_schema, d.rollup_table, r));
    PERFORM pgsketch.raise_unless(NOT (SELECT relrowsecurity FROM pg_class WHERE oid = src), '0A000',
        format('table %s has row-level security enabled', src));
    PERFORM pgsketch.raise_unless((SELECT relkind FROM pg_class WHERE oid = src) IN ('r', 'p', 'm'), '42809',
        format('%s is not a table or materialized view', src));
    ttype := pgsketch.base_type(src, d.time_column);
    PERFORM pgsketch.raise_unless(ttype IN ('date', 'timestamp without time zone', 'timestamp with time zone'), '42804',
        format('time column %I of %s is missing or no longer a date, timestamp or timestamptz', d.time_column, src));
    g := pgsketch.grain_interval(d.grain);
    -- zoned: a timestamptz column bucketed in a zone other than UTC; zhour:
    -- by the hour, where date_trunc keeps each row's UTC offset, so bounds
    -- are instants rather than local times.
    zoned := ttype = 'timestamp with time zone' AND NOT pgsketch.is_utc(d.time_zone);
    zhour := zoned AND d.grain = 'hour';

    ranged := from_time IS NOT NULL OR to_time IS NOT NULL;
    PERFORM pgsketch.raise_unless(NOT (ranged AND full_rebuild), '22023',
        'a refresh is either full or a time range, not both');
    IF ranged THEN
        -- Bounds are read in the rollup's zone, then bucket math runs on local time.
        PERFORM set_config('TimeZone', d.time_zone, true);
        IF from_time IS NOT NULL THEN
            v := from_time::timestamptz;
            lo_local := pgsketch.bucket_local(d.grain, v AT TIME ZONE d.time_zone);
            IF zhour THEN
                lo := date_trunc('hour', v, d.time_zone);
            END IF;
        END IF;
        IF to_time IS NOT NULL THEN
            v := to_time::timestamptz;
            hi_local := pgsketch.bucket_local(d.grain, v AT TIME ZONE d.time_zone);
            IF hi_local < v AT TIME ZONE d.time_zone THEN
                hi_local := hi_local + g;
            END IF;
            IF zhour THEN
                hi := v; -- every bucket starting before to_time
            END IF;
        END IF;
        PERFORM set_config('TimeZone', 'UTC', true);
        PERFORM pgsketch.raise_unless(lo_local IS NULL OR hi_local IS NULL OR lo_local < hi_local, '22023',
            format('empty time range from %s to %s', from_time, to_time));
    ELSIF NOT full_rebuild AND d.watermark IS NOT NULL THEN
        lo_local := pgsketch.bucket_local(d.grain,
            (d.watermark AT TIME ZONE d.time_zone) - coalesce(d.late_window, g));
        IF zhour THEN
            lo := date_trunc('hour', d.watermark - coalesce(d.late_window, g), d.time_zone);
        END IF;
    END IF;
    IF NOT zhour THEN
        lo := lo_local AT TIME ZONE d.time_zone;
        hi := hi_local AT TIME ZONE d.time_zone;
    END IF;

    -- Rows whose time is NULL belong to no bucket and are never rolled up.
    -- The rows read are exactly those whose bucket lies in [lo, hi), the
    -- buckets deleted: for plain times a bound on the time is that; in a
    -- zone, a bucket may start after some of its rows (a midnight that
    -- happens twice counts from the second), so the bound is on the local
    -- time (or, by the hour, on the bucket itself), with a day's margin on
    -- the time for the index. The refresher pins TimeZone = UTC, so lo and
    -- hi print with +00 and mean the same instant when cast back.
    pred := CASE WHEN (SELECT attnotnull FROM pg_attribute WHERE attrelid = src AND attname = d.time_column)
                 THEN 'true' ELSE format('%I IS NOT NULL', d.time_column) END;
    -- A bound as a literal of the time column's type.
    lo_text := CASE ttype WHEN 'timestamp with time zone' THEN lo::text ELSE lo_local::text END;
    hi_text := CASE ttype WHEN 'timestamp with time zone' THEN hi::text ELSE hi_local::text END;
    IF lo IS NOT NULL THEN
        pred := pred || CASE
            WHEN zhour THEN format(' AND %1$I >= %2$L::timestamptz - interval ''1 day'' AND date_trunc(''hour'', %1$I, %3$L) >= %2$L::timestamptz',
                                   d.time_column, lo, d.time_zone)
            WHEN zoned THEN format(' AND %1$I >= %2$L::timestamptz - interval ''1 day'' AND (%1$I AT TIME ZONE %3$L) >= %4$L::timestamp',
                                   d.time_column, lo, d.time_zone, lo_local)
            ELSE format(' AND %I >= %L::%s', d.time_column, lo_text, ttype) END;
        bpred := format('bucket >= %L::%s', lo_text, ttype);
    END IF;
    IF hi IS NOT NULL THEN
        pred := pred || CASE
            WHEN zhour THEN format(' AND %1$I < %2$L::timestamptz + interval ''1 day'' AND date_trunc(''hour'', %1$I, %3$L) < %2$L::timestamptz',
                                   d.time_column, hi, d.time_zone)
            WHEN zoned THEN format(' AND %1$I < %2$L::timestamptz + interval ''1 day'' AND (%1$I AT TIME ZONE %3$L) < %4$L::timestamp',
                                   d.time_column, hi, d.time_zone, hi_local)
            ELSE format(' AND %I < %L::%s', d.time_column, hi_text, ttype) END;
        bpred := bpred || format(' AND bucket < %L::%s', hi_text, ttype);
    END IF;
    EXECUTE format('DELETE FROM %s WHERE %s', dst, bpred);

    -- Base rows carry their time as a wall-clock value that the refresher
    -- buckets by arithmetic (the raw column; for a timestamptz column in a
    -- zone other than UTC, its local time in that zone); partials rows carry
    -- their bucket's start in the same type. For such a zone the refresher
    -- turns each local bucket start into an instant with AT TIME ZONE
    -- (bucket_zone), the rule date_trunc(grain, t, zone) follows.
    -- Hours are the exception: date_trunc('hour', t, zone) keeps t's UTC
    -- offset (the two 02:00 hours of a night that turns the clocks back
    -- stay apart), so hourly buckets in such a zone come from PostgreSQL
    -- and grain 'none' tells the refresher they are bucket starts already.
    time_expr := CASE
        WHEN zhour THEN format('date_trunc(%L, %I, %L)', d.grain, d.time_column, d.time_zone)
        WHEN zoned THEN format('(%I AT TIME ZONE %L)', d.time_column, d.time_zone)
        ELSE format('%I', d.time_column) END;
    bucket_expr := CASE
        WHEN zhour THEN time_expr
        WHEN zoned THEN format('date_trunc(%L, %I AT TIME ZONE %L)', d.grain, d.time_column, d.time_zone)
        WHEN ttype = 'timestamp with time zone' THEN format('date_trunc(%L, %I, %L)', d.grain, d.time_column, d.time_zone)
        WHEN ttype = 'timestamp without time zone' THEN format('date_trunc(%L, %I)', d.grain, d.time_column)
        ELSE format('date_trunc(%L, %I::timestamp)::date', d.grain, d.time_column) END;
    SELECT coalesce(string_agg(format(', %I', x), ''), '') INTO dims FROM unnest(d.dimensions) x;

    -- Measure columns in position order, each in the branch that computes it.
    FOR m IN SELECT * FROM pgsketch.rollup_measures WHERE rollup = r ORDER BY position LOOP
        IF m.kind = 'hll' THEN
            -- The value to hash is its canonical text (DESIGN §2.2): the
            -- refresher prints integers itself from their binary form, text
            -- and varchar arrive as their bytes, and every other type is
            -- printed by its output function (format %s), not by a cast to
            -- text, which differs for boolean and character(n).
            has_hll := true;
            mtype := (SELECT getbase.t FROM (SELECT CASE WHEN typtype = 'd' THEN typbasetype ELSE oid END AS t
                        FROM pg_type WHERE oid = (SELECT atttypid FROM pg_attribute
                                                  WHERE attrelid = src AND attname = m.expression)) getbase);
            vcol := CASE
                WHEN mtype IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'text'::regtype,
                               'character varying'::regtype)
                    THEN format(', %I::%s', m.expression, mtype::regtype)
                ELSE format(', CASE WHEN %1$I IS NOT NULL THEN format(''%%s'', %1$I) END', m.expression) END;
            hll_cols := hll_cols || vcol;
            lean_cols := lean_cols || vcol;
            part_cols := part_cols || ', NULL';
            flds := flds || format('hll:%s:%s:%s', m.log2m, m.regwidth, CASE mtype
                WHEN 'smallint'::regtype THEN 'int2' WHEN 'integer'::regtype THEN 'int4'
                WHEN 'bigint'::regtype THEN 'int8' ELSE 'text' END);
        ELSE
            has_part := has_part OR m.expression <> '*';
            hll_cols := hll_cols || ', NULL';
            part_cols := part_cols || CASE WHEN m.expression = '*' THEN ', count(*)'
                                           ELSE format(', %s(%I)', m.kind, m.expression) END;
            flds := flds || m.kind::text;
        END IF;
    END LOOP;

    -- Base rows are streamed only for sketches; partials are aggregated by
    -- PostgreSQL itself so they are exact for every type. One statement,
    -- one snapshot: both branches see the same rows.
    -- With parts > 1 and a plain table, the base rows are split into parts
    -- by physical position (TID range scans) for parallel readers sharing
    -- one snapshot; the partials, aggregated over the whole range, go with
    -- the first part.
    IF parts > 1 AND has_hll AND (SELECT relkind FROM pg_class WHERE oid = src) = 'r' THEN
        pages := pg_relation_size(src) / current_setting('block_size')::bigint;
    END IF;
    IF pages IS NULL OR pages < parts * 8 THEN
        parts := 1;
    END IF;
    read_sql := '{}';
    FOR i IN 1 .. parts LOOP
        q := NULL;
        IF has_hll THEN
            q := format('SELECT %s%s%s FROM %s WHERE %s%s',
                CASE WHEN has_part THEN 'true, ' ELSE '' END || time_expr, dims,
                CASE WHEN has_part THEN hll_cols ELSE lean_cols END, src, pred,
                CASE WHEN parts = 1 THEN ''
                     WHEN i = 1 THEN format(' AND ctid < ''(%s,0)''::tid', pages * i / parts)
                     WHEN i = parts THEN format(' AND ctid >= ''(%s,0)''::tid', pages * (i - 1) / parts)
                     ELSE format(' AND ctid >= ''(%s,0)''::tid AND ctid < ''(%s,0)''::tid',
                                 pages * (i - 1) / parts, pages * i / parts) END);
        END IF;
        IF i = 1 AND (has_part OR NOT has_hll) THEN
            q := CASE WHEN q IS NULL THEN '' ELSE q || ' UNION ALL ' END
              || format('SELECT false, %s%s%s FROM %s WHERE %s GROUP BY %s',
                        bucket_expr, dims, part_cols, src, pred,
                        (SELECT string_agg(x::text, ', ') FROM generate_series(2, 2 + cardinality(d.dimensions)) x));
        END IF;
        read_sql := read_sql || q;
    END LOOP;
    bucket_zone := CASE WHEN zoned AND NOT zhour THEN d.time_zone END;
    time_kind := CASE ttype WHEN 'date' THEN 'date' ELSE 'timestamp' END;
    grain := CASE WHEN zhour THEN 'none' ELSE d.grain END;
    ndims := cardinality(d.dimensions);
    fields := flds;
    write_sql := format('COPY %s (bucket%s%s) FROM STDIN (FORMAT binary)', dst, dims,
        (SELECT string_agg(format(', %I', column_name), '' ORDER BY position)
           FROM pgsketch.rollup_measures WHERE rollup = r));
    RETURN NEXT;
END $$;

DROP FUNCTION pgsketch.capture_reconcile(text);
DROP FUNCTION pgsketch.capture_remove(text);
DROP FUNCTION pgsketch.capture_check(text, timestamptz, timestamptz);
DROP FUNCTION pgsketch.max_dirty_buckets();
DROP FUNCTION pgsketch.capture_broken(text);
DROP FUNCTION pgsketch.capture_prepare(text);
DROP FUNCTION pgsketch.capture_bucket(pgsketch.rollup_defs, text, text);
DROP FUNCTION pgsketch.capture_function(text);
DROP FUNCTION pgsketch.capture_trigger(text, text);
DROP FUNCTION pgsketch.capture_rels(regclass);
DROP TABLE pgsketch.rollup_captured;
DROP TABLE pgsketch.rollup_dirty;
