-- Change capture: rollups that are never stale.
--
-- Every rolled-up source carries, per rollup, four AFTER ... FOR EACH
-- STATEMENT triggers (INSERT, UPDATE and DELETE with their own transition
-- tables, TRUNCATE without), on the source and on every partition or
-- inheritance child, enabled ALWAYS so that logical replication apply
-- (session_replication_role = replica) fires them too. They append the
-- buckets a statement touched (old and new rows' times, in the rollup's
-- grain and zone) to pgsketch.rollup_dirty, in the writer's transaction:
-- a write and its log entry commit together. The log is append-only, with
-- no key, so concurrent writers to the same bucket never wait for each
-- other; readers de-duplicate.
--
-- Queries read a dirty bucket from the base table instead of the rollup,
-- in the same statement as the rollup rows and the log, so in one snapshot.
-- A refresh deletes the entries its own snapshot sees and rebuilds their
-- buckets; an entry committed later stays and keeps its bucket dirty.
--
-- What no DML trigger sees is checked at query time (pgsketch.capture_check,
-- in the fetch statement): a source dropped and re-created or swapped by
-- RENAME (another OID), partitions attached, detached or dropped (another
-- set of relations than the last refresh read), a trigger disabled or
-- dropped. Such a rollup is not used until a refresh repairs it.

-- rollup_dirty is the change log: one row per bucket a statement touched
-- (duplicates allowed). bucket is the bucket's start as an instant: for a
-- timestamptz source, date_trunc(grain, t, zone); for timestamp and date
-- sources, the wall-clock start read as UTC, as the watermark is.
CREATE TABLE pgsketch.rollup_dirty (
    rollup text        NOT NULL,
    bucket timestamptz NOT NULL
);
CREATE INDEX rollup_dirty_rollup_bucket ON pgsketch.rollup_dirty (rollup, bucket);
COMMENT ON TABLE pgsketch.rollup_dirty IS 'pgsketch change log: buckets written since the last refresh, appended by the capture triggers';

-- rollup_captured lists the relations whose rows a rollup holds and whose
-- capture triggers were in place when it was last refreshed: the source and
-- each partition or inheritance child, by OID.
CREATE TABLE pgsketch.rollup_captured (
    rollup text NOT NULL REFERENCES pgsketch.rollup_defs (name) ON DELETE CASCADE ON UPDATE CASCADE,
    relid  oid  NOT NULL,
    PRIMARY KEY (rollup, relid)
);
COMMENT ON TABLE pgsketch.rollup_captured IS 'pgsketch change capture: the relations each rollup was refreshed from, with their triggers in place';

GRANT SELECT ON pgsketch.rollup_dirty, pgsketch.rollup_captured TO PUBLIC;

-- capture_rels is rel and every relation that inherits from it (partitions
-- and inheritance children, recursively): the relations a query of rel
-- reads.
CREATE FUNCTION pgsketch.capture_rels(rel regclass) RETURNS SETOF oid
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE t(relid) AS (
        SELECT rel::oid
        UNION
        SELECT i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.relid)
    SELECT relid FROM t
$$;

-- capture_trigger is the name of rollup r's capture trigger for event ev
-- (ins, upd, del, trunc); rollup names are at most 48 characters, so the
-- name fits in 63.
CREATE FUNCTION pgsketch.capture_trigger(r text, ev text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN 'pgsketch_' || r || '_' || ev;

-- capture_function is rollup r's trigger function.
CREATE FUNCTION pgsketch.capture_function(r text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN format('pgsketch.%I', 'capture_' || r);

-- capture_bucket is the SQL of the log bucket of time expression x of type
-- ttype in rollup d's grain and zone.
CREATE FUNCTION pgsketch.capture_bucket(d pgsketch.rollup_defs, ttype text, x text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN CASE ttype
        WHEN 'timestamp with time zone' THEN format('date_trunc(%L, %s, %L)', d.grain, x, d.time_zone)
        WHEN 'timestamp without time zone' THEN format('(date_trunc(%L, %s) AT TIME ZONE ''UTC'')', d.grain, x)
        ELSE format('(date_trunc(%L, %s::timestamp) AT TIME ZONE ''UTC'')', d.grain, x) END;

-- capture_local_bucket is the SQL of the local start (a timestamp) of the
-- bucket of time expression x of type ttype in rollup d's grain and zone;
-- the bucket's instant is that AT TIME ZONE d.time_zone (UTC for date and
-- timestamp columns), as refreshes compute it.
CREATE FUNCTION pgsketch.capture_local_bucket(d pgsketch.rollup_defs, ttype text, x text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN CASE ttype
        WHEN 'timestamp with time zone' THEN format('date_trunc(%L, %s AT TIME ZONE %L)', d.grain, x, d.time_zone)
        WHEN 'timestamp without time zone' THEN format('date_trunc(%L, %s)', d.grain, x)
        ELSE format('date_trunc(%L, %s::timestamp)', d.grain, x) END;

-- capture_prepare creates rollup r's trigger function if missing and the
-- capture triggers each relation of its source lacks, enabled ALWAYS. It
-- returns the number of triggers it created. The refresher calls it in a
-- transaction of its own before a refresh, so that the triggers log every
-- write committed after it, and the refresh then reconciles what they could
-- not see. Creating a trigger takes a lock that waits for the table's
-- writers; when every trigger is in place nothing is locked.
CREATE FUNCTION pgsketch.capture_prepare(r text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    ttype text;
    rel oid;
    ev record;
    created integer := 0;
BEGIN
    -- One preparer (or refresh) of a rollup at a time.
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    PERFORM pgsketch.raise_unless(src IS NOT NULL, '42P01',
        format('source table %I.%I of rollup %L does not exist', d.source_schema, d.source_table, r));
    IF (SELECT relkind FROM pg_class WHERE oid = src) NOT IN ('r', 'p') THEN
        RETURN 0; -- a materialized view cannot have triggers: never captured
    END IF;
    ttype := pgsketch.base_type(src, d.time_column);
    PERFORM pgsketch.raise_unless(ttype IN ('date', 'timestamp without time zone', 'timestamp with time zone'), '42804',
        format('time column %I of %s is missing or no longer a date, timestamp or timestamptz', d.time_column, src));
    -- The function is SECURITY DEFINER, owned by the role preparing the
    -- capture (which may write the catalog), with a pinned search_path: a
    -- role that may write the source needs no right on the log.
    IF to_regprocedure(pgsketch.capture_function(r) || '()') IS NULL THEN
        -- The statement's earliest and latest times come first (one pass).
        -- A large statement within 64 buckets (a bulk load) logs every
        -- bucket between them without reading its rows again; any other
        -- logs the distinct buckets of its rows. Hourly buckets in a zone
        -- other than UTC always take the second way (date_trunc keeps each
        -- row's offset there).
        EXECUTE format($f$CREATE FUNCTION %1$s() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
DECLARE
    lo %9$s;
    hi %9$s;
    nrows bigint;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        -- Every bucket the rollup holds.
        INSERT INTO pgsketch.rollup_dirty (rollup, bucket)
        SELECT DISTINCT %2$L, %6$s FROM %7$I.%8$I;
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        SELECT min(x.%4$I), max(x.%4$I), count(*) INTO lo, hi, nrows FROM pgsketch_new x;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT min(x.%4$I), max(x.%4$I), count(*) INTO lo, hi, nrows FROM pgsketch_old x;
    ELSE
        SELECT min(x.t), max(x.t), count(*) INTO lo, hi, nrows
          FROM (SELECT o.%4$I FROM pgsketch_old o UNION ALL SELECT w.%4$I FROM pgsketch_new w) AS x(t);
    END IF;
    IF lo IS NULL THEN
        RETURN NULL; -- no row with a time: no bucket
    END IF;
    IF nrows >= 1000 AND %10$s THEN
        INSERT INTO pgsketch.rollup_dirty (rollup, bucket)
        SELECT %2$L, b AT TIME ZONE %11$L FROM generate_series(%12$s, %13$s, %14$L::interval) AS b;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO pgsketch.rollup_dirty (rollup, bucket)
        SELECT DISTINCT %2$L, %3$s FROM pgsketch_new n WHERE n.%4$I IS NOT NULL;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO pgsketch.rollup_dirty (rollup, bucket)
        SELECT DISTINCT %2$L, %5$s FROM pgsketch_old o WHERE o.%4$I IS NOT NULL;
    ELSE
        INSERT INTO pgsketch.rollup_dirty (rollup, bucket)
        SELECT %2$L, u.b FROM (SELECT %5$s FROM pgsketch_old o WHERE o.%4$I IS NOT NULL
                               UNION SELECT %3$s FROM pgsketch_new n WHERE n.%4$I IS NOT NULL) AS u(b);
    END IF;
    RETURN NULL;
END
$body$$f$,
            pgsketch.capture_function(r), r,
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
            '1 ' || d.grain);
        EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', pgsketch.capture_function(r));
    END IF;
    FOR rel IN SELECT * FROM pgsketch.capture_rels(src) LOOP
        FOR ev IN SELECT * FROM (VALUES ('ins', 'INSERT', 'REFERENCING NEW TABLE AS pgsketch_new'),
                                        ('upd', 'UPDATE', 'REFERENCING OLD TABLE AS pgsketch_old NEW TABLE AS pgsketch_new'),
                                        ('del', 'DELETE', 'REFERENCING OLD TABLE AS pgsketch_old'),
                                        ('trunc', 'TRUNCATE', '')) AS e(tag, event, refs) LOOP
            CONTINUE WHEN EXISTS (SELECT FROM pg_trigger t
                                   WHERE t.tgrelid = rel AND t.tgname = pgsketch.capture_trigger(r, ev.tag)
                                     AND t.tgenabled = 'A');
            -- A trigger missing or disabled on a relation the rollup was
            -- refreshed from: writes may have gone unseen, so the next
            -- refresh must rebuild every bucket (capture_reconcile does
            -- when the record of captured relations is empty).
            DELETE FROM pgsketch.rollup_captured c WHERE c.rollup = r
             AND EXISTS (SELECT FROM pgsketch.rollup_captured x WHERE x.rollup = r AND x.relid = rel);
            EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', pgsketch.capture_trigger(r, ev.tag), rel::regclass);
            EXECUTE format('CREATE TRIGGER %I AFTER %s ON %s %s FOR EACH STATEMENT EXECUTE FUNCTION %s()',
                           pgsketch.capture_trigger(r, ev.tag), ev.event, rel::regclass, ev.refs,
                           pgsketch.capture_function(r));
            EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', rel::regclass, pgsketch.capture_trigger(r, ev.tag));
            created := created + 1;
        END LOOP;
    END LOOP;
    RETURN created;
END $fn$;

-- capture_broken says why rollup r's rows may not reflect its source, or
-- NULL when they do (but for the buckets in the log): the source is not
-- the relation the last refresh read, its set of partitions changed, or a
-- capture trigger is missing or not enabled ALWAYS.
CREATE FUNCTION pgsketch.capture_broken(r text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    rel oid;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    IF NOT FOUND THEN
        RETURN format('rollup %s does not exist', r);
    END IF;
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    IF src IS NULL THEN
        RETURN format('its source %I.%I does not exist', d.source_schema, d.source_table);
    END IF;
    IF (SELECT relkind FROM pg_class WHERE oid = src) NOT IN ('r', 'p') THEN
        RETURN format('its source %s is a materialized view, whose refreshes no trigger sees', src);
    END IF;
    IF NOT EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r) THEN
        RETURN 'it has not been refreshed with change capture yet';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r AND c.relid = src) THEN
        RETURN format('%s is not the table it was refreshed from (dropped and re-created, or swapped by RENAME)', src);
    END IF;
    FOR rel IN SELECT * FROM pgsketch.capture_rels(src) LOOP
        IF NOT EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r AND c.relid = rel) THEN
            RETURN format('%s was attached to or created in %s since its last refresh', rel::regclass, src);
        END IF;
        IF (SELECT count(*) FROM pg_trigger t
             WHERE t.tgrelid = rel AND t.tgenabled = 'A'
               AND t.tgname IN (pgsketch.capture_trigger(r, 'ins'), pgsketch.capture_trigger(r, 'upd'),
                                pgsketch.capture_trigger(r, 'del'), pgsketch.capture_trigger(r, 'trunc'))) <> 4 THEN
            RETURN format('its change capture triggers on %s are disabled or missing', rel::regclass);
        END IF;
    END LOOP;
    IF EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r
                AND c.relid NOT IN (SELECT * FROM pgsketch.capture_rels(src))) THEN
        RETURN format('a partition or child of %s was detached or dropped since its last refresh', src);
    END IF;
    RETURN NULL;
END $$;

-- max_dirty_buckets is how many changed buckets a query's range may hold
-- and still be answered from the rollup (each is read from the base table);
-- past it the query runs exactly.
CREATE FUNCTION pgsketch.max_dirty_buckets() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 64;

-- capture_check returns the number of changed buckets in [lo, hi) (log
-- instants; NULL: unbounded) when rollup r may answer a query over them,
-- reading those buckets from the base table, and otherwise fails
-- with SQLSTATE 55000 and a message starting "pgsketch: ", upon which
-- pgsketch-proxy runs the query exactly. The fetch statement calls it, so
-- the check and the read share one snapshot.
CREATE FUNCTION pgsketch.capture_check(r text, lo timestamptz, hi timestamptz) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    why text := pgsketch.capture_broken(r);
    n bigint;
BEGIN
    IF why IS NULL THEN
        SELECT count(DISTINCT x.bucket) INTO n FROM pgsketch.rollup_dirty x
         WHERE x.rollup = r AND (lo IS NULL OR x.bucket >= lo) AND (hi IS NULL OR x.bucket < hi);
        IF n > pgsketch.max_dirty_buckets() THEN
            why := format('%s of the buckets in the range changed since its last refresh (more than %s)',
                          n, pgsketch.max_dirty_buckets());
        END IF;
    END IF;
    IF why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format('pgsketch: rollup %s not used: %s', r, why),
            HINT = format('SELECT pgsketch.refresh_rollup(%L) through pgsketch-proxy brings it up to date.', r);
    END IF;
    RETURN n;
END $$;

-- capture_remove drops rollup r's capture triggers (where its source and
-- their relations still exist), its trigger function and its log.
CREATE FUNCTION pgsketch.capture_remove(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT tg.tgname, tg.tgrelid::regclass AS rel FROM pg_trigger tg
              WHERE tg.tgname IN (pgsketch.capture_trigger(r, 'ins'), pgsketch.capture_trigger(r, 'upd'),
                                  pgsketch.capture_trigger(r, 'del'), pgsketch.capture_trigger(r, 'trunc'))
                AND tg.tgfoid = to_regprocedure(pgsketch.capture_function(r) || '()') LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
    END LOOP;
    EXECUTE format('DROP FUNCTION IF EXISTS %s()', pgsketch.capture_function(r));
    DELETE FROM pgsketch.rollup_dirty x WHERE x.rollup = r;
    DELETE FROM pgsketch.rollup_captured x WHERE x.rollup = r;
END $$;

-- drop_rollup (version 6): removes the change capture too.
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
    PERFORM pgsketch.capture_remove(name);
    FOR l IN SELECT * FROM pgsketch.rollup_levels x WHERE x.rollup = drop_rollup.name LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I.%I', l.table_schema, l.table_name);
    END LOOP;
    EXECUTE format('DROP TABLE IF EXISTS %I.%I', d.rollup_schema, d.rollup_table);
    DELETE FROM pgsketch.rollup_defs r WHERE r.name = drop_rollup.name;
END $$;

-- capture_reconcile brings rollup r's record of captured relations up to
-- date at the start of a refresh (after pgsketch.capture_prepare committed
-- the triggers). It returns true when the refresh must rebuild every
-- bucket: never captured, another source relation, or a relation gone
-- (its rows left without a trigger seeing them). Relations added since the
-- last refresh (new or attached partitions) have their buckets logged
-- instead, read in this transaction after their triggers were in place.
CREATE FUNCTION pgsketch.capture_reconcile(r text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    ttype text;
    rel oid;
    full_rebuild boolean;
    why text;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    IF (SELECT relkind FROM pg_class WHERE oid = src) NOT IN ('r', 'p') THEN
        DELETE FROM pgsketch.rollup_captured x WHERE x.rollup = r;
        RETURN true;
    END IF;
    FOR rel IN SELECT * FROM pgsketch.capture_rels(src) LOOP
        PERFORM pgsketch.raise_unless((SELECT count(*) FROM pg_trigger t
             WHERE t.tgrelid = rel AND t.tgenabled = 'A'
               AND t.tgname IN (pgsketch.capture_trigger(r, 'ins'), pgsketch.capture_trigger(r, 'upd'),
                                pgsketch.capture_trigger(r, 'del'), pgsketch.capture_trigger(r, 'trunc'))) = 4,
            '55000', format('the change capture triggers of rollup %s on %s are not in place', r, rel::regclass),
            'Run SELECT pgsketch.capture_prepare(...) first, as pgsketch-proxy''s refresh does.');
    END LOOP;
    full_rebuild := NOT EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r AND c.relid = src)
        OR EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r
                    AND c.relid NOT IN (SELECT * FROM pgsketch.capture_rels(src)));
    IF NOT full_rebuild THEN
        ttype := pgsketch.base_type(src, d.time_column);
        FOR rel IN SELECT x FROM pgsketch.capture_rels(src) x
                    WHERE x NOT IN (SELECT c.relid FROM pgsketch.rollup_captured c WHERE c.rollup = r) LOOP
            EXECUTE format('INSERT INTO pgsketch.rollup_dirty (rollup, bucket) SELECT DISTINCT %L, %s FROM ONLY %s AS t WHERE t.%I IS NOT NULL',
                           r, pgsketch.capture_bucket(d, ttype, format('t.%I', d.time_column)), rel::regclass, d.time_column);
        END LOOP;
    END IF;
    DELETE FROM pgsketch.rollup_captured x WHERE x.rollup = r;
    INSERT INTO pgsketch.rollup_captured (rollup, relid) SELECT r, x FROM pgsketch.capture_rels(src) x;
    RETURN full_rebuild;
END $$;

-- refresh_begin (version 6): version 4's, with change capture. It
-- reconciles the captured relations first (a full rebuild when the source
-- changed in ways no trigger sees), drains the change log, rebuilding the
-- logged buckets (an incremental refresh reads those before its usual
-- range each on its own),
-- and reads no row at or after the start of the bucket holding now():
-- the watermark stays at or before it. Rows deleted from the rollup table
-- are still every bucket from lo on, so that buckets a refresh before
-- version 6 built past that point go.
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
    -- Levels are rebuilt from the oldest rebuilt bucket on (from the
    -- rollup's rows: cheap), and the watermark computed from there.
    IF extra IS NOT NULL THEN
        lo := extra[1];
    END IF;
    RETURN NEXT;
END $$;

-- catalog (version 4): version 3's, with whether each rollup's change
-- capture is in place (pgsketch-proxy answers from a rollup only then; the
-- fetch statement checks it again in the query's own snapshot).
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v3;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object(
               'capture', pgsketch.capture_broken(c.r->>'name')))::json
               ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v3()) WITH ORDINALITY AS c(r, o));

-- rollups (version 6): with each rollup's change capture (NULL when in
-- place, else why not) and the buckets logged as changed since its last
-- refresh.
CREATE OR REPLACE VIEW pgsketch.rollups AS
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
       d.version,
       pgsketch.capture_broken(d.name) AS capture_broken,
       (SELECT count(DISTINCT x.bucket) FROM pgsketch.rollup_dirty x WHERE x.rollup = d.name) AS dirty_buckets
  FROM pgsketch.rollup_defs d;
