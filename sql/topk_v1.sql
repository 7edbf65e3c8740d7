-- Version 1 of top-k measures: a rollup may keep, per bucket and dimension
-- values, a frequent-items summary of a column (the counts of rows per
-- item, the largest ones kept exactly up to a bounded error; sketch.Freq's
-- documented format), from which pgsketch-proxy proposes the candidates of
-- a top-k that PostgreSQL then counts exactly. A topk measure keeps log2 of
-- its number of counters in log2m and hashes nothing.
--
-- The functions are those of sql/theta_v1.sql with topk added; the previous
-- versions are kept as create_rollup_v7 and level_begin_v7 for the down
-- migration (measure_read is replaced, and restored by it).

ALTER TABLE pgsketch.rollup_measures
    DROP CONSTRAINT kind_known,
    ADD CONSTRAINT kind_known CHECK (kind IN ('hll', 'theta', 'topk', 'count', 'sum', 'min', 'max')),
    DROP CONSTRAINT sketch_params,
    ADD CONSTRAINT sketch_params CHECK (
        CASE kind WHEN 'hll' THEN log2m IS NOT NULL AND regwidth IS NOT NULL AND hash = 'xxhash64'
                  WHEN 'theta' THEN log2m BETWEEN 5 AND 16 AND regwidth IS NULL AND hash = 'murmur3_128_9001'
                  WHEN 'topk' THEN log2m BETWEEN 4 AND 16 AND regwidth IS NULL AND hash IS NULL
                  ELSE log2m IS NULL AND regwidth IS NULL AND hash IS NULL END);
COMMENT ON COLUMN pgsketch.rollup_measures.log2m IS
    'log2 of the sketch size: registers of an hll measure, nominal entries (lg_k) of a theta measure, counters of a topk measure';

-- measure_read (version 2): topk measures are read from the base rows as
-- theta measures are; a NULL value is an item of its own.
CREATE OR REPLACE FUNCTION pgsketch.measure_read(src regclass, m pgsketch.rollup_measures,
                                      OUT sketched boolean, OUT base_col text, OUT part_col text, OUT field text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mtype oid;
    form text;
BEGIN
    sketched := m.kind IN ('hll', 'theta', 'topk');
    IF NOT sketched THEN
        part_col := CASE WHEN m.expression = '*' THEN ', count(*)' ELSE format(', %s(%I)', m.kind, m.expression) END;
        field := m.kind;
        RETURN;
    END IF;
    mtype := (SELECT CASE WHEN typtype = 'd' THEN typbasetype ELSE oid END
                FROM pg_type WHERE oid = (SELECT atttypid FROM pg_attribute
                                          WHERE attrelid = src AND attname = m.expression));
    base_col := CASE
        WHEN mtype IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'text'::regtype,
                       'character varying'::regtype)
            THEN format(', %I::%s', m.expression, mtype::regtype)
        ELSE format(', CASE WHEN %1$I IS NOT NULL THEN format(''%%s'', %1$I) END', m.expression) END;
    form := CASE mtype WHEN 'smallint'::regtype THEN 'int2' WHEN 'integer'::regtype THEN 'int4'
                       WHEN 'bigint'::regtype THEN 'int8' ELSE 'text' END;
    field := CASE m.kind WHEN 'hll' THEN format('hll:%s:%s:%s', m.log2m, m.regwidth, form)
                         ELSE format('%s:%s:%s', m.kind, m.log2m, form) END;
END $$;


ALTER FUNCTION pgsketch.create_rollup(text, text, text, text, text, text[], text[], text[], text[], text[],
                                      integer, integer, interval, text[], integer) RENAME TO create_rollup_v7;
CREATE FUNCTION pgsketch.create_rollup(
        name text,
        source text,
        time_column text,
        grain text DEFAULT 'day',
        time_zone text DEFAULT 'UTC',
        dimensions text[] DEFAULT '{}',
        distinct_columns text[] DEFAULT '{}',
        sum_columns text[] DEFAULT '{}',
        min_columns text[] DEFAULT '{}',
        max_columns text[] DEFAULT '{}',
        log2m integer DEFAULT 14,
        regwidth integer DEFAULT 5,
        late_window interval DEFAULT NULL,
        theta_columns text[] DEFAULT '{}',
        theta_lgk integer DEFAULT 12,
        topk_columns text[] DEFAULT '{}',
        topk_size integer DEFAULT 1024)
    RETURNS regclass
    -- No pinned search_path here: source is resolved with the caller's.
    -- pg_catalog is searched first anyway, and pgsketch names are qualified.
    LANGUAGE plpgsql AS $$
DECLARE
    src regclass;
    src_schema text;
    src_table text;
    src_kind "char";
    ttype text;
    bucket_type text;
    col text;
    coltype text;
    mcol text;
    kinds text[] := ARRAY['sum', 'min', 'max'];
    k text;
    i int;
    pos int := 1;
    defs text[] := '{}';
    used text[] := ARRAY['bucket', 'row_count'];
    dst regclass;
BEGIN
    PERFORM pgsketch.raise_unless(name ~ '^[a-z_][a-z0-9_]{0,47}$', '22023',
        format('invalid rollup name %L', name),
        'A rollup name is 1 to 48 lower-case letters, digits and underscores, not starting with a digit.');
    PERFORM pgsketch.raise_unless(NOT EXISTS (SELECT 1 FROM pgsketch.rollup_defs d WHERE d.name = create_rollup.name),
        '42710', format('rollup %L already exists', name));
    PERFORM pgsketch.raise_unless(source IS NOT NULL AND time_column IS NOT NULL, '22004',
        'source and time_column must not be NULL');
    src := to_regclass(source);
    PERFORM pgsketch.raise_unless(src IS NOT NULL, '42P01', format('relation %s does not exist', source));
    SELECT n.nspname, c.relname, c.relkind INTO src_schema, src_table, src_kind
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = src;
    PERFORM pgsketch.raise_unless(src_kind IN ('r', 'p', 'm'), '42809',
        format('%s is not a table or materialized view', src),
        CASE WHEN src_kind = 'v' THEN 'Views are not rolled up: the row-level security of the tables under them cannot be checked. Roll up the table.' END);
    PERFORM pgsketch.raise_unless(NOT (SELECT relrowsecurity FROM pg_class WHERE oid = src), '0A000',
        format('table %s has row-level security enabled', src),
        'A rollup would show every role the aggregates of rows its policies hide; pgsketch does not roll up such tables.');
    PERFORM pgsketch.raise_unless(has_table_privilege(src, 'SELECT'), '42501',
        format('permission denied for table %s', src));

    ttype := pgsketch.base_type(src, time_column);
    PERFORM pgsketch.raise_unless(ttype IS NOT NULL, '42703',
        format('column %I of relation %s does not exist', time_column, src));
    PERFORM pgsketch.raise_unless(ttype IN ('date', 'timestamp without time zone', 'timestamp with time zone'), '42804',
        format('time column %I of %s has type %s', time_column, src, ttype),
        'The time column must be of type date, timestamp or timestamptz.');
    bucket_type := ttype;
    PERFORM pgsketch.raise_unless(grain IN ('hour', 'day', 'week', 'month'), '22023',
        format('unknown grain %L', grain), 'The grain is one of hour, day, week, month.');
    PERFORM pgsketch.raise_unless(grain <> 'hour' OR ttype <> 'date', '22023',
        format('grain hour is finer than time column %I of type date', time_column));
    PERFORM pgsketch.raise_unless(pgsketch.is_time_zone(time_zone), '22023',
        format('unknown time zone %L', time_zone),
        'Use a name from pg_timezone_names, such as UTC or Europe/Berlin.');
    PERFORM pgsketch.raise_unless(pgsketch.is_utc(time_zone) OR ttype = 'timestamp with time zone', '22023',
        format('time zone %L given for time column %I of type %s', time_zone, time_column, ttype),
        'Buckets of date and timestamp columns are cut on the values themselves; omit the time zone.');
    PERFORM pgsketch.raise_unless(log2m BETWEEN 4 AND 17, '22023',
        format('log2m %s is out of range', log2m), 'log2m is between 4 and 17 (postgresql-hll stops at 17).');
    PERFORM pgsketch.raise_unless(regwidth BETWEEN 1 AND 5, '22023',
        format('regwidth %s is out of range', regwidth), 'regwidth is between 1 and 5.');
    PERFORM pgsketch.raise_unless(late_window IS NULL OR late_window >= interval '0', '22023',
        format('late_window %s is negative', late_window));
    PERFORM pgsketch.raise_unless(theta_lgk BETWEEN 5 AND 16, '22023',
        format('theta_lgk %s is out of range', theta_lgk),
        'theta_lgk is between 5 and 16: a Theta sketch keeps up to 2^theta_lgk hashes of 8 bytes.');
    PERFORM pgsketch.raise_unless(topk_size BETWEEN 16 AND 65536 AND topk_size & (topk_size - 1) = 0, '22023',
        format('topk_size %s is not a power of two between 16 and 65536', topk_size),
        'A top-k summary keeps topk_size counters per rollup row; 1024 is the default.');
    PERFORM pgsketch.raise_unless(cardinality(coalesce(distinct_columns, '{}')) + cardinality(coalesce(sum_columns, '{}'))
        + cardinality(coalesce(min_columns, '{}')) + cardinality(coalesce(max_columns, '{}'))
        + cardinality(coalesce(theta_columns, '{}')) + cardinality(coalesce(topk_columns, '{}')) > 0, '22023',
        'a rollup needs at least one measure', 'Give distinct_columns, theta_columns, topk_columns, sum_columns, min_columns or max_columns.');

    PERFORM pgsketch.raise_unless(pgsketch.is_identifier_list(coalesce(dimensions, '{}')), '42701',
        coalesce(format('dimension %s is listed twice', (SELECT x FROM unnest(dimensions) x GROUP BY x HAVING count(*) > 1 LIMIT 1)),
                 format('dimensions %s hold an empty or NULL name', dimensions)),
        'List each dimension once, by its column name.');

    INSERT INTO pgsketch.rollup_defs (name, source_schema, source_table, rollup_schema, rollup_table,
                                      time_column, grain, time_zone, dimensions, late_window)
    VALUES (name, src_schema, src_table, src_schema, name, time_column, grain, time_zone,
            coalesce(dimensions, '{}'), late_window);
    INSERT INTO pgsketch.rollup_measures (rollup, column_name, position, kind, expression)
    VALUES (name, 'row_count', pos, 'count', '*');

    FOREACH col IN ARRAY coalesce(dimensions, '{}') LOOP
        coltype := pgsketch.column_type(src, col);
        PERFORM pgsketch.raise_unless(coltype IS NOT NULL, '42703',
            format('column %I of relation %s does not exist', col, src));
        PERFORM pgsketch.raise_unless(NOT col = ANY (used), '42701',
            format('dimension %I is listed twice or clashes with a rollup column', col),
            'bucket and row_count are the rollup table''s own columns.');
        PERFORM pgsketch.raise_unless(pgsketch.exact_column(src, col), '42804',
            format('cannot use column %I of type %s as a dimension', col, coltype),
            'Dimensions are integer, text, varchar, char(n), uuid, date, boolean, timestamp or timestamptz columns under a deterministic collation: values that are equal exactly when their bytes are.');
        used := used || col;
        defs := defs || format('%I %s', col, coltype);
    END LOOP;

    FOREACH col IN ARRAY coalesce(distinct_columns, '{}') LOOP
        coltype := pgsketch.column_type(src, col);
        PERFORM pgsketch.raise_unless(coltype IS NOT NULL, '42703',
            format('column %I of relation %s does not exist', col, src));
        PERFORM pgsketch.raise_unless(pgsketch.exact_column(src, col), '42804',
            format('cannot sketch distinct values of column %I of type %s', col, coltype),
            'Distinct counts are sketched for integer, text, varchar, char(n), uuid, date, boolean, timestamp and timestamptz columns under a deterministic collation, whose text form is equal exactly when the values are.');
        mcol := 'distinct_' || col;
        PERFORM pgsketch.raise_unless(NOT mcol = ANY (used), '42701', format('column %I is listed twice', mcol));
        PERFORM pgsketch.raise_unless(mcol ~ '^[a-z_][a-z0-9_]{0,62}$', '22023',
            format('measure column name %I is not a plain lower-case name', mcol));
        used := used || mcol;
        pos := pos + 1;
        INSERT INTO pgsketch.rollup_measures (rollup, column_name, position, kind, expression, log2m, regwidth, hash)
        VALUES (name, mcol, pos, 'hll', col, log2m, regwidth, 'xxhash64');
        defs := defs || format('%I bytea', mcol);
    END LOOP;

    FOREACH col IN ARRAY coalesce(theta_columns, '{}') LOOP
        coltype := pgsketch.column_type(src, col);
        PERFORM pgsketch.raise_unless(coltype IS NOT NULL, '42703',
            format('column %I of relation %s does not exist', col, src));
        PERFORM pgsketch.raise_unless(pgsketch.theta_column(src, col), '42804',
            format('cannot build a Theta sketch of column %I of type %s', col, coltype),
            'Theta sketches are built of smallint, integer, bigint, text and varchar columns under a deterministic collation.');
        mcol := 'theta_' || col;
        PERFORM pgsketch.raise_unless(NOT mcol = ANY (used), '42701', format('column %I is listed twice', mcol));
        PERFORM pgsketch.raise_unless(mcol ~ '^[a-z_][a-z0-9_]{0,62}$', '22023',
            format('measure column name %I is not a plain lower-case name', mcol));
        used := used || mcol;
        pos := pos + 1;
        INSERT INTO pgsketch.rollup_measures (rollup, column_name, position, kind, expression, log2m, hash)
        VALUES (name, mcol, pos, 'theta', col, theta_lgk, 'murmur3_128_9001');
        defs := defs || format('%I bytea', mcol);
    END LOOP;

    FOREACH col IN ARRAY coalesce(topk_columns, '{}') LOOP
        coltype := pgsketch.column_type(src, col);
        PERFORM pgsketch.raise_unless(coltype IS NOT NULL, '42703',
            format('column %I of relation %s does not exist', col, src));
        PERFORM pgsketch.raise_unless(pgsketch.theta_column(src, col), '42804',
            format('cannot keep a top-k summary of column %I of type %s', col, coltype),
            'Top-k summaries are kept of smallint, integer, bigint, text and varchar columns under a deterministic collation.');
        mcol := 'topk_' || col;
        PERFORM pgsketch.raise_unless(NOT mcol = ANY (used), '42701', format('column %I is listed twice', mcol));
        PERFORM pgsketch.raise_unless(mcol ~ '^[a-z_][a-z0-9_]{0,62}$', '22023',
            format('measure column name %I is not a plain lower-case name', mcol));
        used := used || mcol;
        pos := pos + 1;
        INSERT INTO pgsketch.rollup_measures (rollup, column_name, position, kind, expression, log2m)
        VALUES (name, mcol, pos, 'topk', col, (SELECT log(2, topk_size)::int));
        defs := defs || format('%I bytea', mcol);
    END LOOP;

    FOR i IN 1 .. 3 LOOP
        k := kinds[i];
        FOREACH col IN ARRAY coalesce(CASE i WHEN 1 THEN sum_columns WHEN 2 THEN min_columns ELSE max_columns END, '{}') LOOP
            PERFORM pgsketch.raise_unless(pgsketch.column_type(src, col) IS NOT NULL, '42703',
                format('column %I of relation %s does not exist', col, src));
            BEGIN
                -- The partial's type is what PostgreSQL's own aggregate returns.
                EXECUTE format('SELECT format_type(pg_typeof(%s(%I))::oid, NULL) FROM %s WHERE false', k, col, src)
                   INTO coltype;
                -- min and max return the column's own values: keep its
                -- modifier (character(n), numeric(p,s)), which pg_typeof drops.
                IF k IN ('min', 'max') AND coltype = pgsketch.base_type(src, col) THEN
                    coltype := pgsketch.column_type(src, col);
                END IF;
            EXCEPTION WHEN undefined_function THEN
                RAISE EXCEPTION USING ERRCODE = '42804',
                    MESSAGE = format('cannot compute %s of column %I of type %s', k, col, pgsketch.column_type(src, col));
            END;
            mcol := k || '_' || col;
            PERFORM pgsketch.raise_unless(NOT mcol = ANY (used), '42701', format('column %I is listed twice', mcol));
            PERFORM pgsketch.raise_unless(mcol ~ '^[a-z_][a-z0-9_]{0,62}$', '22023',
                format('measure column name %I is not a plain lower-case name', mcol));
            used := used || mcol;
            pos := pos + 1;
            INSERT INTO pgsketch.rollup_measures (rollup, column_name, position, kind, expression)
            VALUES (name, mcol, pos, k, col);
            defs := defs || format('%I %s', mcol, coltype);
        END LOOP;
    END LOOP;

    PERFORM pgsketch.raise_unless(to_regclass(format('%I.%I', src_schema, name)) IS NULL, '42P07',
        format('relation %I.%I already exists', src_schema, name),
        'The rollup table is created in the source table''s schema under the rollup''s name; choose another name.');
    -- defs: dimensions first, then measures in position order (row_count first).
    EXECUTE format('CREATE TABLE %I.%I (bucket %s NOT NULL, %s row_count bigint NOT NULL%s, '
                   'CONSTRAINT %I UNIQUE NULLS NOT DISTINCT (bucket%s))',
        src_schema, name, bucket_type,
        (SELECT coalesce(string_agg(x || ', ', ''), '') FROM unnest(defs[1:cardinality(coalesce(dimensions, '{}'))]) x),
        (SELECT coalesce(string_agg(', ' || x, ''), '') FROM unnest(defs[cardinality(coalesce(dimensions, '{}')) + 1:]) x),
        name || '_key',
        (SELECT coalesce(string_agg(format(', %I', x), ''), '') FROM unnest(coalesce(dimensions, '{}')) x));
    dst := to_regclass(format('%I.%I', src_schema, name));
    -- Sketches are near-random bytes that pglz cannot shrink (a few per
    -- cent at best): store them uncompressed, as the hll extension stores
    -- its own type (STORAGE external). Writing a refreshed row then skips a
    -- failed compression of its sketches, most of a refresh's writing time.
    FOR mcol IN SELECT column_name FROM pgsketch.rollup_measures WHERE rollup = name AND kind IN ('hll', 'theta', 'topk') ORDER BY position LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET STORAGE EXTERNAL', dst, mcol);
    END LOOP;
    EXECUTE format('COMMENT ON TABLE %s IS %L', dst,
        format('pgsketch rollup %s of %s: one row per %s bucket of %I and dimension values; refreshed by pgsketch-proxy',
               name, src, grain, time_column));
    PERFORM pgsketch.sync_grants(name);
    RETURN dst;
END $$;


ALTER FUNCTION pgsketch.level_begin(text, text, timestamptz, timestamptz) RENAME TO level_begin_v7;
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
        IF m.kind IN ('hll', 'theta', 'topk') THEN
            hll_cols := hll_cols || format(', %I', m.column_name);
            part_cols := part_cols || ', NULL';
            flds := flds || CASE m.kind WHEN 'hll' THEN format('hll:%s:%s:sketch', m.log2m, m.regwidth)
                                        ELSE format('%s:%s:sketch', m.kind, m.log2m) END;
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


-- rollups (version 8): topk measures with their size.
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
       (SELECT count(DISTINCT x.bucket) FROM pgsketch.rollup_dirty x WHERE x.rollup = d.name) AS dirty_buckets
  FROM pgsketch.rollup_defs d;

