-- Rollup levels: coarser copies of a rollup, pre-merged by the refresher.
--
-- A level of grain month of a daily rollup holds, per month and dimension
-- values, exactly what merging that month's daily rows gives: the union of
-- their sketches, the sum of their counts and sums, the least of their
-- minimums and the greatest of their maximums. A query over many days then
-- reads one row per whole month instead of one per day (pgsketch-proxy
-- picks the coarsest level a query allows). The refresher rebuilds a
-- level's buckets from the rollup's rows in the same transaction as the
-- rollup's, so levels, rollup, watermark and version always agree.

-- rollup_levels lists each rollup's levels. A level is built (filled from
-- every row of its rollup) by the first refresh after add_rollup_level;
-- pgsketch-proxy reads only built levels.
CREATE TABLE pgsketch.rollup_levels (
    rollup       text    NOT NULL REFERENCES pgsketch.rollup_defs (name) ON DELETE CASCADE ON UPDATE CASCADE,
    grain        text    NOT NULL CONSTRAINT level_grain_known CHECK (grain IN ('day', 'week', 'month')),
    table_schema text    NOT NULL,
    table_name   text    NOT NULL,
    built        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (rollup, grain),
    CONSTRAINT level_table_unique UNIQUE (table_schema, table_name)
);
COMMENT ON TABLE pgsketch.rollup_levels IS 'Coarser pre-merged levels of pgsketch rollups';
GRANT SELECT ON pgsketch.rollup_levels TO PUBLIC;

-- copy_select_grants gives dst exactly the SELECT grants of src (besides
-- dst's owner), as rollup tables carry their source table's.
CREATE FUNCTION pgsketch.copy_select_grants(src regclass, dst regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = dst AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('REVOKE ALL ON %s FROM %s', dst,
                       CASE g.grantee WHEN 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
    END LOOP;
    FOR g IN
        SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
         WHERE c.oid = src AND a.privilege_type = 'SELECT'
           AND a.grantee <> (SELECT relowner FROM pg_class WHERE oid = dst)
    LOOP
        EXECUTE format('GRANT SELECT ON %s TO %s', dst,
                       CASE g.grantee WHEN 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
    END LOOP;
END $$;

-- sync_grants (version 3): the rollup table and each of its level tables
-- get the SELECT grants of the source table.
CREATE OR REPLACE FUNCTION pgsketch.sync_grants(rollup text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    dst regclass;
    l pgsketch.rollup_levels;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = rollup;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', rollup));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    dst := to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table));
    PERFORM pgsketch.raise_unless(src IS NOT NULL, '42P01',
        format('source table %I.%I of rollup %L does not exist', d.source_schema, d.source_table, rollup));
    PERFORM pgsketch.raise_unless(dst IS NOT NULL, '42P01',
        format('rollup table %I.%I of rollup %L does not exist', d.rollup_schema, d.rollup_table, rollup),
        format('Drop the rollup with SELECT pgsketch.drop_rollup(%L) and create it again.', rollup));
    PERFORM pgsketch.copy_select_grants(src, dst);
    FOR l IN SELECT * FROM pgsketch.rollup_levels AS x WHERE x.rollup = sync_grants.rollup ORDER BY x.grain LOOP
        dst := to_regclass(format('%I.%I', l.table_schema, l.table_name));
        PERFORM pgsketch.raise_unless(dst IS NOT NULL, '42P01',
            format('level table %I.%I of rollup %L does not exist', l.table_schema, l.table_name, rollup),
            format('Drop the level with SELECT pgsketch.drop_rollup_level(%L, %L) and add it again.', rollup, l.grain));
        PERFORM pgsketch.copy_select_grants(src, dst);
    END LOOP;
END $$;

-- drop_rollup (version 3): drops the level tables too.
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

-- add_rollup_level adds a level of grain g to rollup r: an empty table
-- <rollup table>_<g> beside the rollup table, with its columns, key and
-- grants, filled by the next refresh. The level's grain must be coarser
-- than the rollup's and hold whole rollup buckets: day, week or month
-- levels of an hourly rollup, week or month levels of a daily one.
CREATE FUNCTION pgsketch.add_rollup_level(r text, g text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    tbl text;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    PERFORM pgsketch.raise_unless(g IN ('day', 'week', 'month'), '22023',
        format('unknown level grain %L', g), 'A level is by day, week or month.');
    PERFORM pgsketch.raise_unless(
        (d.grain = 'hour' AND g IN ('day', 'week', 'month')) OR (d.grain = 'day' AND g IN ('week', 'month')), '22023',
        format('a %s level does not hold whole buckets of rollup %L, whose grain is %s', g, r, d.grain),
        'Levels of an hourly rollup are by day, week or month; of a daily one by week or month.');
    PERFORM pgsketch.raise_unless(NOT EXISTS (SELECT FROM pgsketch.rollup_levels x WHERE x.rollup = r AND x.grain = g),
        '42710', format('rollup %L already has a %s level', r, g));
    tbl := left(d.rollup_table, 63 - length(g) - 1) || '_' || g;
    PERFORM pgsketch.raise_unless(to_regclass(format('%I.%I', d.rollup_schema, tbl)) IS NULL, '42P07',
        format('relation %I.%I already exists', d.rollup_schema, tbl));
    EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', d.rollup_schema, tbl, d.rollup_schema, d.rollup_table);
    EXECUTE format('COMMENT ON TABLE %I.%I IS %L', d.rollup_schema, tbl,
        format('pgsketch rollup %s by %s (a level: filled by its refresh)', r, g));
    INSERT INTO pgsketch.rollup_levels (rollup, grain, table_schema, table_name) VALUES (r, g, d.rollup_schema, tbl);
    PERFORM pgsketch.sync_grants(r);
END $$;

-- drop_rollup_level drops rollup r's level of grain g and its table, and
-- bumps the rollup's version so that pgsketch-proxy stops reading it.
CREATE FUNCTION pgsketch.drop_rollup_level(r text, g text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    l pgsketch.rollup_levels;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    SELECT * INTO l FROM pgsketch.rollup_levels x WHERE x.rollup = r AND x.grain = g;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L has no %s level', r, g));
    EXECUTE format('DROP TABLE IF EXISTS %I.%I', l.table_schema, l.table_name);
    DELETE FROM pgsketch.rollup_levels x WHERE x.rollup = r AND x.grain = g;
    UPDATE pgsketch.rollup_defs SET version = version + 1, updated_at = now() WHERE name = r;
END $$;

-- level_begin rebuilds, inside a refresh's transaction (after the rollup's
-- rows of [lo, hi) were written), rollup r's level of grain g: the level
-- buckets holding [lo, hi) (NULL: unbounded; every bucket for a level not
-- built yet), which it deletes. It returns what refresh_begin returns for
-- the refresher's pipeline, reading the rollup table instead of the
-- source: flag true rows carry each rollup row's time and sketches (form
-- sketch: unioned, not hashed), flag false rows the partials of each level
-- bucket and dimension values, aggregated by PostgreSQL. It marks the
-- level built.
CREATE FUNCTION pgsketch.level_begin(r text, g text, lo timestamptz, hi timestamptz)
    RETURNS TABLE (read_sql text, ndims integer, fields text[], write_sql text,
                   bucket_zone text, time_kind text, grain text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    l pgsketch.rollup_levels;
    src regclass;
    dst regclass;
    ttype text;
    zoned boolean;
    lo_local timestamp;
    hi_local timestamp;
    bpred text := 'true';
    time_expr text;
    bucket_expr text;
    dims text := '';
    m record;
    hll_cols text := '';
    part_cols text := '';
    flds text[] := '{}';
    lit text;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    SELECT * INTO l FROM pgsketch.rollup_levels x WHERE x.rollup = r AND x.grain = g;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L has no %s level', r, g));
    src := to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table));
    dst := to_regclass(format('%I.%I', l.table_schema, l.table_name));
    PERFORM pgsketch.raise_unless(dst IS NOT NULL, '42P01',
        format('level table %I.%I of rollup %L does not exist', l.table_schema, l.table_name, r),
        format('Drop the level with SELECT pgsketch.drop_rollup_level(%L, %L) and add it again.', r, g));
    -- The rollup's bucket column has the source time column's type.
    ttype := pgsketch.base_type(src, 'bucket');
    zoned := ttype = 'timestamp with time zone' AND NOT pgsketch.is_utc(d.time_zone);
    IF l.built THEN
        lo_local := pgsketch.bucket_local(g, lo AT TIME ZONE d.time_zone);
        hi_local := pgsketch.bucket_local(g, hi AT TIME ZONE d.time_zone);
        IF hi_local < hi AT TIME ZONE d.time_zone THEN
            hi_local := hi_local + pgsketch.grain_interval(g);
        END IF;
    END IF;
    -- Bounds on the bucket column, in its type.
    IF lo_local IS NOT NULL THEN
        lit := CASE ttype WHEN 'timestamp with time zone' THEN (lo_local AT TIME ZONE d.time_zone)::text
                          ELSE lo_local::text END;
        bpred := format('bucket >= %L::%s', lit, ttype);
    END IF;
    IF hi_local IS NOT NULL THEN
        lit := CASE ttype WHEN 'timestamp with time zone' THEN (hi_local AT TIME ZONE d.time_zone)::text
                          ELSE hi_local::text END;
        bpred := bpred || format(' AND bucket < %L::%s', lit, ttype);
    END IF;
    EXECUTE format('DELETE FROM %s WHERE %s', dst, bpred);
    UPDATE pgsketch.rollup_levels x SET built = true WHERE x.rollup = r AND x.grain = g;

    -- As refresh_begin's, with the rollup's bucket as the time.
    time_expr := CASE WHEN zoned THEN format('(bucket AT TIME ZONE %L)', d.time_zone) ELSE 'bucket' END;
    bucket_expr := CASE
        WHEN zoned THEN format('date_trunc(%L, bucket AT TIME ZONE %L)', g, d.time_zone)
        WHEN ttype = 'timestamp with time zone' THEN format('date_trunc(%L, bucket, %L)', g, d.time_zone)
        WHEN ttype = 'timestamp without time zone' THEN format('date_trunc(%L, bucket)', g)
        ELSE format('date_trunc(%L, bucket::timestamp)::date', g) END;
    SELECT coalesce(string_agg(format(', %I', x), ''), '') INTO dims FROM unnest(d.dimensions) x;
    FOR m IN SELECT rm.*, format_type(a.atttypid, a.atttypmod) AS coltype
               FROM pgsketch.rollup_measures rm
               JOIN pg_attribute a ON a.attrelid = src AND a.attname = rm.column_name
              WHERE rm.rollup = r ORDER BY rm.position LOOP
        IF m.kind = 'hll' THEN
            hll_cols := hll_cols || format(', %I', m.column_name);
            part_cols := part_cols || ', NULL';
            flds := flds || format('hll:%s:%s:sketch', m.log2m, m.regwidth);
        ELSE
            hll_cols := hll_cols || ', NULL';
            part_cols := part_cols || CASE m.kind
                WHEN 'count' THEN format(', CAST(sum(%I) AS %s)', m.column_name, m.coltype)
                WHEN 'sum' THEN format(', CAST(sum(%I) AS %s)', m.column_name, m.coltype)
                ELSE format(', %s(%I)', m.kind, m.column_name) END;
            flds := flds || m.kind::text;
        END IF;
    END LOOP;
    -- Every level bucket gets a partials row (its row count is the sum of
    -- the rollup rows' counts, not the number of rollup rows).
    read_sql := format('SELECT true, %s%s%s FROM %s WHERE %s UNION ALL SELECT false, %s%s%s FROM %s WHERE %s GROUP BY %s',
        time_expr, dims, hll_cols, src, bpred, bucket_expr, dims, part_cols, src, bpred,
        (SELECT string_agg(x::text, ', ') FROM generate_series(2, 2 + cardinality(d.dimensions)) x));
    ndims := cardinality(d.dimensions);
    fields := flds;
    write_sql := format('COPY %s (bucket%s%s) FROM STDIN (FORMAT binary)', dst, dims,
        (SELECT string_agg(format(', %I', column_name), '' ORDER BY position)
           FROM pgsketch.rollup_measures WHERE rollup = r));
    bucket_zone := CASE WHEN zoned THEN d.time_zone END;
    time_kind := CASE ttype WHEN 'date' THEN 'date' ELSE 'timestamp' END;
    grain := g;
    RETURN NEXT;
END $$;

-- catalog (version 3): version 2's, with each rollup's built levels and
-- the planner's estimate of the distinct values of each column of its
-- table (pg_stats, as far as the caller may read it; the refresher
-- analyzes the bucket and dimension columns), which pgsketch-proxy uses to
-- estimate how many rollup rows a query merges per group.
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v2;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object(
               'levels',
               (SELECT coalesce(jsonb_agg(jsonb_build_object('grain', l.grain, 'schema', l.table_schema,
                                                             'table', l.table_name) ORDER BY l.grain), '[]')
                  FROM pgsketch.rollup_levels l WHERE l.rollup = c.r->>'name' AND l.built),
               'distinct_values',
               (SELECT coalesce(jsonb_object_agg(s.attname,
                           CASE WHEN s.n_distinct >= 0 THEN s.n_distinct
                                ELSE -s.n_distinct * greatest(k.reltuples, 0) END), '{}')
                  FROM pg_stats s
                  JOIN pg_class k ON k.oid = to_regclass(format('%I.%I', c.r->>'rollup_schema', c.r->>'rollup_table'))
                 WHERE s.schemaname = c.r->>'rollup_schema' AND s.tablename = c.r->>'rollup_table'
                   AND NOT s.inherited)))::json
               ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v2()) WITH ORDINALITY AS c(r, o));
