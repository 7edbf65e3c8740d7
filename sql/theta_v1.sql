-- Version 1 of Theta sketch measures: a rollup may keep, beside its HLL
-- columns, a Theta sketch (Apache DataSketches compact serialization,
-- serial version 3, seed 9001) of the distinct values of a column, which
-- the proxy intersects and subtracts to count overlaps. A theta measure
-- stores its lg_k (log2 of the sketch's nominal entries) in log2m and names
-- its hash: MurmurHash3 x64 128 with seed 9001 of the value's own bytes, as
-- datasketches-postgresql's theta_sketch_build hashes them.
--
-- The measure loops of refresh_begin and level_begin now ask measure_read
-- how each measure is read; the functions are otherwise those of
-- sql/capture_v1.sql and sql/levels_v1.sql, which hold the comments. The
-- previous versions are kept under the names create_rollup_v4,
-- refresh_begin_v6 and level_begin_v3 for the down migration.

ALTER TABLE pgsketch.rollup_measures
    DROP CONSTRAINT kind_known,
    ADD CONSTRAINT kind_known CHECK (kind IN ('hll', 'theta', 'count', 'sum', 'min', 'max')),
    DROP CONSTRAINT hash_known,
    ADD CONSTRAINT hash_known CHECK (hash IN ('xxhash64', 'murmur3_128_9001')),
    DROP CONSTRAINT sketch_params,
    ADD CONSTRAINT sketch_params CHECK (
        CASE kind WHEN 'hll' THEN log2m IS NOT NULL AND regwidth IS NOT NULL AND hash = 'xxhash64'
                  WHEN 'theta' THEN log2m BETWEEN 5 AND 16 AND regwidth IS NULL AND hash = 'murmur3_128_9001'
                  ELSE log2m IS NULL AND regwidth IS NULL AND hash IS NULL END);
COMMENT ON COLUMN pgsketch.rollup_measures.log2m IS
    'log2 of the sketch size: registers of an hll measure, nominal entries (lg_k) of a theta measure';

-- theta_column reports whether column col of rel can have a Theta sketch:
-- an integer, text or varchar column (domains over them included) under a
-- deterministic collation, so that values are equal exactly when the bytes
-- hashed are. The refresher hashes what theta_sketch_build would: the
-- 2, 4 or 8 little-endian bytes of an integer, the bytes of a string.
CREATE FUNCTION pgsketch.theta_column(rel regclass, col text) RETURNS boolean
    LANGUAGE sql STABLE STRICT
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT coalesce(bt.oid, t.oid) IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype,
                                               'text'::regtype, 'character varying'::regtype)
               AND coalesce((SELECT c.collisdeterministic FROM pg_collation c WHERE c.oid = a.attcollation), true)
              FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
              LEFT JOIN pg_type bt ON bt.oid = t.typbasetype AND t.typtype = 'd'
             WHERE a.attrelid = rel AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped);

-- measure_read says how refresh_begin reads measure m of source src. A
-- sketched measure (hll, theta) comes from every base row: base_col is the
-- value in the form the refresher hashes (integers and strings as their
-- binary form; for hll every other type as the text its output function
-- prints, docs/design.md §2.2). A partial aggregate is computed by PostgreSQL:
-- part_col. field is the refresher's description of the measure
-- ("hll:14:5:int8", "theta:12:text", "sum", ...).
CREATE FUNCTION pgsketch.measure_read(src regclass, m pgsketch.rollup_measures,
                                      OUT sketched boolean, OUT base_col text, OUT part_col text, OUT field text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mtype oid;
    form text;
BEGIN
    sketched := m.kind IN ('hll', 'theta');
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
                         ELSE format('theta:%s:%s', m.log2m, form) END;
END $$;

ALTER FUNCTION pgsketch.create_rollup(text, text, text, text, text, text[], text[], text[], text[], text[],
                                      integer, integer, interval) RENAME TO create_rollup_v4;
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
        theta_lgk integer DEFAULT 12)
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
    PERFORM pgsketch.raise_unless(cardinality(coalesce(distinct_columns, '{}')) + cardinality(coalesce(sum_columns, '{}'))
        + cardinality(coalesce(min_columns, '{}')) + cardinality(coalesce(max_columns, '{}'))
        + cardinality(coalesce(theta_columns, '{}')) > 0, '22023',
        'a rollup needs at least one measure', 'Give distinct_columns, theta_columns, sum_columns, min_columns or max_columns.');

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
    FOR mcol IN SELECT column_name FROM pgsketch.rollup_measures WHERE rollup = name AND kind IN ('hll', 'theta') ORDER BY position LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET STORAGE EXTERNAL', dst, mcol);
    END LOOP;
    EXECUTE format('COMMENT ON TABLE %s IS %L', dst,
        format('pgsketch rollup %s of %s: one row per %s bucket of %I and dimension values; refreshed by pgsketch-proxy',
               name, src, grain, time_column));
    PERFORM pgsketch.sync_grants(name);
    RETURN dst;
END $$;

ALTER FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer) RENAME TO refresh_begin_v6;
CREATE FUNCTION pgsketch.refresh_begin(r text, full_rebuild boolean DEFAULT false,
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
    zoned boolean;
    zhour boolean;
    lo_text text;
    hi_text text;
    pred text := 'true';
    bpred text := 'true';
    dims text := '';
    m pgsketch.rollup_measures;
    mr record;
    sketch_cols text := '';
    lean_cols text := '';
    vcol text;
    part_cols text := '';
    flds text[] := '{}';
    has_sketch boolean := false;
    has_part boolean := false;
    q text;
    pages bigint;
    gone_buckets timestamptz[];
    extra timestamptz[];
    cap timestamptz;
    cap_local timestamp;
    cap_text text;
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

    -- Relations the triggers could not see (a new source, partitions gone)
    -- force a full rebuild; added partitions log their buckets.
    IF pgsketch.capture_reconcile(r) AND NOT full_rebuild THEN
        IF from_time IS NOT NULL OR to_time IS NOT NULL THEN
            RAISE NOTICE 'rollup %: its source changed in ways no trigger sees; rebuilding every bucket instead of the range', r;
        END IF;
        full_rebuild := true;
        from_time := NULL;
        to_time := NULL;
    END IF;

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

    -- Drain the change log: the entries this transaction sees are deleted
    -- and their buckets rebuilt; an entry committed after this statement
    -- stays, and its bucket stays dirty. (Every later read of the refresh
    -- sees at least what this statement saw.)
    IF full_rebuild THEN
        DELETE FROM pgsketch.rollup_dirty x WHERE x.rollup = r;
    ELSIF ranged THEN
        DELETE FROM pgsketch.rollup_dirty x
         WHERE x.rollup = r AND (lo IS NULL OR x.bucket >= lo) AND (hi IS NULL OR x.bucket < hi);
    ELSE
        WITH gone AS (DELETE FROM pgsketch.rollup_dirty x WHERE x.rollup = r RETURNING x.bucket)
        SELECT array_agg(DISTINCT gone.bucket) INTO gone_buckets FROM gone;
    END IF;
    -- The open bucket (the one holding now()) and later ones are not
    -- materialized: queries read them from the base table, so rows written
    -- into them need no rebuild and a row dated far in the future does not
    -- move the watermark.
    IF NOT ranged THEN
        cap_local := pgsketch.bucket_local(d.grain, now() AT TIME ZONE d.time_zone);
        cap := CASE WHEN zhour THEN date_trunc('hour', now(), d.time_zone) ELSE cap_local AT TIME ZONE d.time_zone END;
        IF lo IS NOT NULL AND lo > cap THEN
            lo := cap;
            lo_local := cap_local;
        END IF;
        -- The logged buckets before lo are rebuilt too, each on its own
        -- (the buckets from lo on are rebuilt anyway).
        IF lo IS NOT NULL THEN
            SELECT array_agg(b ORDER BY b) INTO extra FROM unnest(gone_buckets) b WHERE b < lo;
        END IF;
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
    IF cap IS NOT NULL THEN
        cap_text := CASE ttype WHEN 'timestamp with time zone' THEN cap::text ELSE cap_local::text END;
        pred := pred || CASE
            WHEN zhour THEN format(' AND %1$I < %2$L::timestamptz + interval ''1 day'' AND date_trunc(''hour'', %1$I, %3$L) < %2$L::timestamptz',
                                   d.time_column, cap, d.time_zone)
            WHEN zoned THEN format(' AND %1$I < %2$L::timestamptz + interval ''1 day'' AND (%1$I AT TIME ZONE %3$L) < %4$L::timestamp',
                                   d.time_column, cap, d.time_zone, cap_local)
            ELSE format(' AND %I < %L::%s', d.time_column, cap_text, ttype) END;
    END IF;
    IF extra IS NOT NULL THEN
        -- Each logged bucket by an index range on the time column (with a
        -- day's margin in a zone), then exactly by its bucket.
        pred := format('((%s) OR ((%s) AND %s = ANY (%L::timestamptz[])))', pred,
            (SELECT string_agg(CASE WHEN ttype = 'timestamp with time zone'
                    THEN format('%1$I >= %2$L::timestamptz - interval ''1 day'' AND %1$I < %2$L::timestamptz + %3$L::interval + interval ''1 day''',
                                d.time_column, b, g)
                    ELSE format('%1$I >= %2$L::timestamp AND %1$I < %2$L::timestamp + %3$L::interval',
                                d.time_column, b AT TIME ZONE 'UTC', g) END, ' OR ')
               FROM unnest(extra) b),
            pgsketch.capture_bucket(d, ttype, format('%I', d.time_column)), extra);
        bpred := format('((%s) OR %s = ANY (%L::timestamptz[]))', bpred,
            CASE ttype WHEN 'timestamp with time zone' THEN 'bucket' ELSE '(bucket::timestamp AT TIME ZONE ''UTC'')' END, extra);
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
        SELECT * INTO mr FROM pgsketch.measure_read(src, m);
        IF mr.sketched THEN
            has_sketch := true;
            sketch_cols := sketch_cols || mr.base_col;
            lean_cols := lean_cols || mr.base_col;
            part_cols := part_cols || ', NULL';
        ELSE
            has_part := has_part OR m.expression <> '*';
            sketch_cols := sketch_cols || ', NULL';
            part_cols := part_cols || mr.part_col;
        END IF;
        flds := flds || mr.field;
    END LOOP;

    -- Base rows are streamed only for sketches; partials are aggregated by
    -- PostgreSQL itself so they are exact for every type. One statement,
    -- one snapshot: both branches see the same rows.
    -- With parts > 1 and a plain table, the base rows are split into parts
    -- by physical position (TID range scans) for parallel readers sharing
    -- one snapshot; the partials, aggregated over the whole range, go with
    -- the first part.
    IF parts > 1 AND has_sketch AND (SELECT relkind FROM pg_class WHERE oid = src) = 'r' THEN
        pages := pg_relation_size(src) / current_setting('block_size')::bigint;
    END IF;
    IF pages IS NULL OR pages < parts * 8 THEN
        parts := 1;
    END IF;
    read_sql := '{}';
    FOR i IN 1 .. parts LOOP
        q := NULL;
        IF has_sketch THEN
            q := format('SELECT %s%s%s FROM %s WHERE %s%s',
                CASE WHEN has_part THEN 'true, ' ELSE '' END || time_expr, dims,
                CASE WHEN has_part THEN sketch_cols ELSE lean_cols END, src, pred,
                CASE WHEN parts = 1 THEN ''
                     WHEN i = 1 THEN format(' AND ctid < ''(%s,0)''::tid', pages * i / parts)
                     WHEN i = parts THEN format(' AND ctid >= ''(%s,0)''::tid', pages * (i - 1) / parts)
                     ELSE format(' AND ctid >= ''(%s,0)''::tid AND ctid < ''(%s,0)''::tid',
                                 pages * (i - 1) / parts, pages * i / parts) END);
        END IF;
        IF i = 1 AND (has_part OR NOT has_sketch) THEN
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
    -- Levels are rebuilt from the oldest rebuilt bucket on (from the
    -- rollup's rows: cheap), and the watermark computed from there.
    IF extra IS NOT NULL THEN
        lo := extra[1];
    END IF;
    RETURN NEXT;
END $$;

ALTER FUNCTION pgsketch.level_begin(text, text, timestamptz, timestamptz) RENAME TO level_begin_v3;
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
        IF m.kind IN ('hll', 'theta') THEN
            hll_cols := hll_cols || format(', %I', m.column_name);
            part_cols := part_cols || ', NULL';
            flds := flds || CASE m.kind WHEN 'hll' THEN format('hll:%s:%s:sketch', m.log2m, m.regwidth)
                                        ELSE format('theta:%s:sketch', m.log2m) END;
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

-- rollups (version 7): theta measures with their lg_k.
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

-- catalog (version 7): version 6's, with the source table's columns that
-- are declared NOT NULL. Sketches skip NULLs while INTERSECT and EXCEPT
-- treat NULLs as equal, so pgsketch-proxy counts an overlap of a column's
-- sets from Theta sketches only when the column cannot hold a NULL.
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v6;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object(
               'not_null_columns',
               (SELECT coalesce(jsonb_agg(a.attname ORDER BY a.attnum), '[]') FROM pg_attribute a
                 WHERE a.attrelid = to_regclass(format('%I.%I', c.r->>'source_schema', c.r->>'source_table'))
                   AND a.attnum > 0 AND NOT a.attisdropped AND a.attnotnull)))::json
               ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v6()) WITH ORDINALITY AS c(r, o));
