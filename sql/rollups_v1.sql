-- pgsketch rollup API, version 1: create, drop, describe and refresh rollups.
-- Installed by migration 000002. Every function pins search_path so that a
-- caller's search_path cannot change what the names in it mean, and every
-- generated statement quotes its identifiers (format %I / %L).

-- grain_interval is the length of one bucket of grain g.
CREATE FUNCTION pgsketch.grain_interval(g text) RETURNS interval
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE g WHEN 'hour' THEN interval '1 hour'
                  WHEN 'day' THEN interval '1 day'
                  WHEN 'week' THEN interval '7 days'
                  WHEN 'month' THEN interval '1 month' END;

-- column_type is the type of column col of relation rel, with its modifier
-- (e.g. numeric(12,2)), or NULL when rel has no such column.
CREATE FUNCTION pgsketch.column_type(rel regclass, col text) RETURNS text
    LANGUAGE sql STABLE STRICT
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
             WHERE a.attrelid = rel AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped);

-- hll_hashable reports whether a column of type t may be sketched: its
-- canonical text (docs/design.md §2.2) must be equal exactly when the values are, or
-- COUNT(DISTINCT) and the sketch would count different things. numeric
-- (1.0 = 1.00), floating point (0 = -0) and case-insensitive types fail that.
CREATE FUNCTION pgsketch.hll_hashable(t regtype) RETURNS boolean
    LANGUAGE sql STABLE STRICT
    SET search_path = pg_catalog, pg_temp
    RETURN (WITH RECURSIVE base(typ, next) AS (    -- strip domains
                SELECT oid, typbasetype FROM pg_type WHERE oid = t
                UNION ALL
                SELECT p.oid, p.typbasetype FROM pg_type p JOIN base ON p.oid = base.next)
            SELECT typ FROM base WHERE next = 0) IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype,
                              'text'::regtype, 'character varying'::regtype, 'character'::regtype,
                              'uuid'::regtype, 'date'::regtype, 'boolean'::regtype,
                              'timestamp without time zone'::regtype,
                              'timestamp with time zone'::regtype);

-- exact_column reports whether column col of rel holds values that are equal
-- exactly when their bytes (and printed text) are: a type hll_hashable
-- accepts, bounded if it is character(n) (unbounded bpchar ignores trailing
-- spaces in comparisons), under a deterministic collation. Dimensions are
-- grouped by their bytes and distinct values sketched by their text, so both
-- must be such columns, or one group (or value) could become two.
CREATE FUNCTION pgsketch.exact_column(rel regclass, col text) RETURNS boolean
    LANGUAGE sql STABLE STRICT
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT pgsketch.hll_hashable(a.atttypid::regtype)
               AND (t.typname <> 'bpchar' AND coalesce(bt.typname, '') <> 'bpchar'
                    OR greatest(a.atttypmod, t.typtypmod) > 0)
               AND coalesce((SELECT c.collisdeterministic FROM pg_collation c WHERE c.oid = a.attcollation), true)
              FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
              LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
             WHERE a.attrelid = rel AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped);

-- base_type is the type of column col of rel without its modifier
-- (timestamp(0) with time zone is timestamp with time zone), or NULL.
CREATE FUNCTION pgsketch.base_type(rel regclass, col text) RETURNS text
    LANGUAGE sql STABLE STRICT
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT format_type(a.atttypid, NULL) FROM pg_attribute a
             WHERE a.attrelid = rel AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped);

-- is_utc reports whether time zone tz is UTC under one of its names.
CREATE FUNCTION pgsketch.is_utc(tz text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN tz IN ('UTC', 'Etc/UTC', 'UCT', 'Etc/UCT', 'Universal', 'Etc/Universal', 'Zulu', 'Etc/Zulu');

-- raise_unless fails with SQLSTATE code and message msg (and hint) when ok is
-- not true.
CREATE FUNCTION pgsketch.raise_unless(ok boolean, code text, msg text, hint text DEFAULT NULL)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        IF hint IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = code, MESSAGE = msg;
        END IF;
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = msg, HINT = hint;
    END IF;
END $$;

-- sync_grants makes the roles that can SELECT rollup r's table exactly the
-- roles that can SELECT its source table (besides the rollup table's owner):
-- every other privilege on the rollup table is revoked from everyone else.
-- create_rollup and every refresh call it.
CREATE FUNCTION pgsketch.sync_grants(rollup text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    dst regclass;
    g record;
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

-- create_rollup defines rollup name over table source and creates its
-- (empty) rollup table source_schema.name; refresh it to fill it. It checks
-- everything first and creates nothing when anything is wrong.
--
--   SELECT pgsketch.create_rollup('events_daily', 'public.events', 'created_at',
--          grain => 'day', dimensions => '{country,device}',
--          distinct_columns => '{user_id}', sum_columns => '{amount}');
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
        late_window interval DEFAULT NULL)
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
    PERFORM pgsketch.raise_unless(cardinality(coalesce(distinct_columns, '{}')) + cardinality(coalesce(sum_columns, '{}'))
        + cardinality(coalesce(min_columns, '{}')) + cardinality(coalesce(max_columns, '{}')) > 0, '22023',
        'a rollup needs at least one measure', 'Give distinct_columns, sum_columns, min_columns or max_columns.');

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
    EXECUTE format('COMMENT ON TABLE %s IS %L', dst,
        format('pgsketch rollup %s of %s: one row per %s bucket of %I and dimension values; refreshed by pgsketch-proxy',
               name, src, grain, time_column));
    PERFORM pgsketch.sync_grants(name);
    RETURN dst;
END $$;

-- drop_rollup removes rollup name: its catalog rows and its table. It waits
-- for a running refresh of the rollup to finish.
CREATE FUNCTION pgsketch.drop_rollup(name text, if_exists boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
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
    EXECUTE format('DROP TABLE IF EXISTS %I.%I', d.rollup_schema, d.rollup_table);
    DELETE FROM pgsketch.rollup_defs r WHERE r.name = drop_rollup.name;
END $$;

-- lock_class is the first key of the advisory locks pgsketch takes (the
-- second is hashtext of the rollup name): refreshes and drops of one
-- rollup never overlap.
CREATE FUNCTION pgsketch.lock_class() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 1885827943; -- 'pgsk' read as a big-endian int32

-- refresh_rollup is executed by pgsketch-proxy, which intercepts it: the
-- sketches need the xxhash64 of each value, which PostgreSQL cannot compute.
-- Reaching PostgreSQL itself means the statement did not go through the
-- proxy.
CREATE FUNCTION pgsketch.refresh_rollup(name text, full_rebuild boolean DEFAULT false,
                                        from_time text DEFAULT NULL, to_time text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '0A000',
        MESSAGE = 'pgsketch.refresh_rollup must be executed by pgsketch-proxy',
        DETAIL = 'Sketching needs xxhash64, which PostgreSQL does not have; pgsketch-proxy runs the refresh when the statement is sent through it.',
        HINT = format('Send SELECT pgsketch.refresh_rollup(%L) through pgsketch-proxy with the simple query protocol (as psql does), or run: pgsketch-proxy rollup refresh %s --dsn ...', name, name);
END $$;

-- bucket_local is the local start of the bucket of grain g holding local time t.
CREATE FUNCTION pgsketch.bucket_local(g text, t timestamp) RETURNS timestamp
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN date_trunc(g, t);

-- refresh_begin starts a refresh of rollup r inside the caller's
-- transaction: it takes the rollup's advisory lock (waiting for another
-- refresh to finish), decides the buckets to rebuild, deletes their rows,
-- and returns the statements the refresher runs next:
--   read_sql    one SELECT per part (see parts) to stream with COPY TO
--               (FORMAT binary), each yielding: a flag, a
--               time, the dimensions, then one column per measure in
--               position order. Rows flagged true are base rows: their time
--               is the row's own (for a timestamptz column in a zone other
--               than UTC, its local time there) and only the hll columns
--               are set, to the value to sketch. Rows flagged false hold the
--               partials of one bucket and dimension values, aggregated by
--               PostgreSQL: the bucket start as time, the other measures set;
--   ndims       the number of dimensions;
--   fields      each measure's kind in position order; hll measures as
--               hll:LOG2M:REGWIDTH:FORM, FORM saying how the value arrives
--               (int2, int4, int8 binary, or text: its canonical text);
--   write_sql   COPY ... FROM STDIN (FORMAT binary) for the rebuilt rows
--               (bucket, dims, every measure in position order);
--   time_kind   date or timestamp: the binary form of the times;
--   grain       the bucket width the refresher cuts times into, or none
--               when the times are bucket starts already;
--   bucket_zone when set, bucket starts are local times in this zone, to be
--               turned into instants with AT TIME ZONE (as date_trunc(grain,
--               t, zone) does) before writing.
-- lo and hi bound the rebuilt buckets (NULL = unbounded). Modes: full,
-- incremental (from the watermark minus the late-data window; the first
-- refresh is full), or a range [from_time, to_time) widened to whole buckets
-- (from_time and to_time are read in the rollup's time zone).
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
    pred := format('%I IS NOT NULL', d.time_column);
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
            -- The value to hash is its canonical text (docs/design.md §2.2): the
            -- refresher prints integers itself from their binary form, text
            -- and varchar arrive as their bytes, and every other type is
            -- printed by its output function (format %s), not by a cast to
            -- text, which differs for boolean and character(n).
            has_hll := true;
            mtype := (SELECT getbase.t FROM (SELECT CASE WHEN typtype = 'd' THEN typbasetype ELSE oid END AS t
                        FROM pg_type WHERE oid = (SELECT atttypid FROM pg_attribute
                                                  WHERE attrelid = src AND attname = m.expression)) getbase);
            hll_cols := hll_cols || CASE
                WHEN mtype IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'text'::regtype,
                               'character varying'::regtype)
                    THEN format(', %I::%s', m.expression, mtype::regtype)
                ELSE format(', CASE WHEN %1$I IS NOT NULL THEN format(''%%s'', %1$I) END', m.expression) END;
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
            q := format('SELECT true, %s%s%s FROM %s WHERE %s%s', time_expr, dims, hll_cols, src, pred,
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

-- refresh_finish completes a refresh begun by refresh_begin in the same
-- transaction, after the rebuilt rows were written: it advances the
-- watermark (to the end of the newest bucket read; a range refresh leaves it
-- alone), bumps the version, re-syncs the grants and queues a NOTIFY on
-- channel pgsketch_rollups, delivered at commit.
CREATE FUNCTION pgsketch.refresh_finish(r text, lo timestamptz, ranged boolean)
    RETURNS TABLE (version bigint, watermark timestamptz, rollup_rows bigint)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    dst regclass;
    ttype text;
    newest timestamp;
    wm timestamptz;
    n bigint;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    dst := to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table));
    ttype := pgsketch.base_type(dst, 'bucket');
    wm := d.watermark;
    IF NOT ranged THEN
        -- The rows at or after lo are exactly the buckets this refresh read.
        -- Infinite buckets (rows at +/-infinity) do not move the watermark:
        -- such rows stay after it, read from the base table by queries.
        -- The end of the newest bucket is computed on local time, as bucket
        -- boundaries are, except for hours in a zone: date_trunc keeps each
        -- row's offset there, so every row of an hourly bucket lies within
        -- one hour (absolute) of its start.
        EXECUTE format('SELECT max(%s) FROM %s WHERE isfinite(bucket) AND %s',
            CASE WHEN ttype = 'timestamp with time zone' AND d.grain = 'hour' AND NOT pgsketch.is_utc(d.time_zone)
                     THEN 'bucket AT TIME ZONE ''UTC'''
                 WHEN ttype = 'timestamp with time zone' THEN format('bucket AT TIME ZONE %L', d.time_zone)
                 ELSE 'bucket::timestamp' END,
            dst,
            CASE WHEN lo IS NULL THEN 'true'
                 WHEN ttype = 'timestamp with time zone' THEN format('bucket >= %L::timestamptz', lo)
                 ELSE format('bucket >= %L::%s', lo AT TIME ZONE 'UTC', ttype) END)
           INTO newest;
        wm := CASE WHEN newest IS NULL THEN lo
                   WHEN ttype = 'timestamp with time zone' AND d.grain = 'hour' AND NOT pgsketch.is_utc(d.time_zone)
                       THEN (newest + interval '1 hour') AT TIME ZONE 'UTC'
                   ELSE (newest + pgsketch.grain_interval(d.grain)) AT TIME ZONE d.time_zone END;
    END IF;
    EXECUTE format('SELECT count(*) FROM %s', dst) INTO n;
    UPDATE pgsketch.rollup_defs x
       SET watermark = wm, version = x.version + 1, refreshed_at = now(), updated_at = now(), rollup_rows = n
     WHERE x.name = r
    RETURNING x.version, x.watermark, x.rollup_rows INTO version, watermark, rollup_rows;
    PERFORM pgsketch.sync_grants(r);
    PERFORM pg_notify('pgsketch_rollups', json_build_object('rollup', r, 'version', version)::text);
    RETURN NEXT;
END $$;

-- rollups describes every rollup: what it reads, what it stores, how big it
-- is and how fresh.
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
COMMENT ON VIEW pgsketch.rollups IS 'Every pgsketch rollup with its source, grain, dimensions, measures, size and freshness';

-- catalog returns the whole rollup catalog as one JSON array, the form
-- pgsketch-proxy loads it in (package catalog).
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (
    SELECT coalesce(json_agg(json_build_object(
        'name', d.name,
        'source_schema', d.source_schema, 'source_table', d.source_table,
        'rollup_schema', d.rollup_schema, 'rollup_table', d.rollup_table,
        'source_oid', to_regclass(format('%I.%I', d.source_schema, d.source_table))::oid::bigint,
        'source_rls', coalesce((SELECT relrowsecurity FROM pg_class
                                 WHERE oid = to_regclass(format('%I.%I', d.source_schema, d.source_table))), false),
        'source_columns', (SELECT coalesce(json_agg(a.attname ORDER BY a.attnum), '[]') FROM pg_attribute a
                            WHERE a.attrelid = to_regclass(format('%I.%I', d.source_schema, d.source_table))
                              AND a.attnum > 0 AND NOT a.attisdropped),
        'time_column', d.time_column,
        'time_type', pgsketch.base_type(to_regclass(format('%I.%I', d.source_schema, d.source_table)), d.time_column),
        'grain', d.grain, 'time_zone', d.time_zone,
        'dimensions', (SELECT coalesce(json_agg(json_build_object('column', x,
                              'type', pgsketch.column_type(to_regclass(format('%I.%I', d.source_schema, d.source_table)), x))
                              ORDER BY o), '[]')
                         FROM unnest(d.dimensions) WITH ORDINALITY AS u(x, o)),
        'measures', (SELECT json_agg(json_build_object('column', m.column_name, 'kind', m.kind,
                              'expression', m.expression,
                              'type', CASE WHEN m.expression = '*' THEN NULL ELSE
                                  pgsketch.column_type(to_regclass(format('%I.%I', d.source_schema, d.source_table)), m.expression) END,
                              'log2m', m.log2m, 'regwidth', m.regwidth, 'hash', m.hash) ORDER BY m.position)
                       FROM pgsketch.rollup_measures m WHERE m.rollup = d.name),
        'watermark', to_char(d.watermark AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'late_window_seconds', extract(epoch FROM coalesce(d.late_window, pgsketch.grain_interval(d.grain))),
        'version', d.version,
        'rows', coalesce(d.rollup_rows, 0)
    ) ORDER BY d.name), '[]')
    FROM pgsketch.rollup_defs d);
