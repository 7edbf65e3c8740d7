-- pgsketch catalog objects, version 11: a rollup is never answered from
-- rows its source's definition, privileges or capture no longer match,
-- and its capture never makes a user's write fail.
--
-- * A definition fingerprint per captured relation
--   (pgsketch.capture_fingerprint), recorded when a refresh reconciles the
--   capture and compared by every answering statement (capture_broken,
--   through capture_check): row-level security, and for every column the
--   rollup reads its number, type, typmod, collation, NOT NULL and the
--   identity of its catalog row (any ALTER COLUMN ... TYPE rewrites that
--   row, also to the type the column already has), and the capture
--   triggers' and trigger function's catalog rows (a trigger disabled and
--   enabled again is a new row version). Any
--   difference: the rollup is answered exactly until a refresh, which
--   rebuilds every bucket. A rollup refreshed before this version has no
--   fingerprint and is answered exactly until its next refresh, which
--   rebuilds it whole: recording today's definition at upgrade would accept
--   a drift that already happened.
-- * The capture function computes a statement's buckets inside a block
--   that traps every error (a column renamed, dropped or retyped under it):
--   the failure is recorded in pgsketch.rollup_faults, which marks the
--   rollup unusable until a full rebuild, and the user's statement goes on.
--   The block only reads, so its subtransaction takes no transaction ID;
--   the log insert stays outside it. capture_prepare regenerates the
--   function whenever its text would differ (the time column's type
--   changed), and every DDL pgsketch runs on a user's table waits at most
--   pgsketch.ddl_lock_timeout (5 s) for its lock.
-- * Reading a rollup follows the source's privileges at every moment, not
--   at the last refresh: rollup and level tables carry row-level security
--   with one policy, which asks pgsketch.require_source_read, and the
--   answering statement asks it too. A role without SELECT on the source
--   (or on every column the rollup reads), or any role while the source
--   has row-level security enabled, gets SQLSTATE 42501, never an empty
--   or partial answer. The tables' owner (the rollup's creator, which
--   writes them) and roles with BYPASSRLS are not subject to the policy.
-- * An incremental refresh re-reads a logged bucket at -infinity by
--   equality (its range, [b, b + grain), is empty).
-- * A source distributed by Citus is refused: no trigger is installed on
--   it (they would fire on the workers, where the change log does not
--   exist) and existing rollups on one are answered exactly.

ALTER TABLE pgsketch.rollup_captured ADD COLUMN fingerprint jsonb;
COMMENT ON COLUMN pgsketch.rollup_captured.fingerprint IS 'the relation''s definition as the last refresh saw it (pgsketch.capture_fingerprint)';

-- rollup_faults records the writes whose buckets a capture trigger could
-- not compute: the rollup is answered exactly until a refresh rebuilds it
-- whole. Rows roll back with the write that caused them.
CREATE TABLE pgsketch.rollup_faults (
    rollup  text        NOT NULL REFERENCES pgsketch.rollup_defs (name) ON DELETE CASCADE ON UPDATE CASCADE,
    relid   oid         NOT NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    message text        NOT NULL
);
CREATE INDEX rollup_faults_rollup ON pgsketch.rollup_faults (rollup);
COMMENT ON TABLE pgsketch.rollup_faults IS 'pgsketch change capture: writes whose buckets a capture trigger could not compute';
GRANT SELECT ON pgsketch.rollup_faults TO PUBLIC;

-- ddl_lock_timeout is how long DDL pgsketch runs on a user's table
-- (creating, enabling or dropping capture triggers) waits for its lock, so
-- that a refresh never queues the application's writers behind a long
-- transaction: the setting pgsketch.ddl_lock_timeout, else 5 s.
CREATE FUNCTION pgsketch.ddl_lock_timeout() RETURNS text
    LANGUAGE sql STABLE
    RETURN coalesce(nullif(current_setting('pgsketch.ddl_lock_timeout', true), ''), '5s');

-- read_columns are the columns of its source that rollup d reads.
CREATE FUNCTION pgsketch.read_columns(d pgsketch.rollup_defs) RETURNS text[]
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN ARRAY(SELECT DISTINCT c FROM unnest(d.time_column || d.dimensions
                     || ARRAY(SELECT m.expression FROM pgsketch.rollup_measures m
                               WHERE m.rollup = d.name AND m.expression <> '*')) AS c
                  ORDER BY c);
END $$;

-- distributed reports whether rel is a table distributed by Citus.
CREATE FUNCTION pgsketch.distributed(rel oid) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    found boolean;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)' INTO found USING rel;
    RETURN found;
END $$;

-- capture_fingerprint is the definition of relation rel that rollup r's
-- rows depend on (see the top of this file); cols are the columns r reads.
-- A jsonb object: security (row-level security enabled, forced), columns
-- (per column present: number, type, typmod, collation, NOT NULL, catalog
-- row version) and triggers (per capture trigger: name, state, function,
-- catalog row version, the function's catalog row version).
CREATE FUNCTION pgsketch.capture_fingerprint(r text, rel oid, cols text[]) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    -- Every answering statement computes it: one plan for the session,
    -- never planned anew for the arguments of each call.
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    fp jsonb;
BEGIN
    SELECT jsonb_build_object(
        'security', concat_ws(',', c.relrowsecurity, c.relforcerowsecurity),
        'columns', coalesce((SELECT jsonb_object_agg(a.attname, concat_ws(',', a.attnum, a.atttypid, a.atttypmod, a.attcollation,
                                                                         a.attnotnull, a.xmin))
                               FROM pg_attribute a
                              WHERE a.attrelid = rel AND a.attname = ANY (cols) AND a.attnum > 0 AND NOT a.attisdropped), '{}'),
        'triggers', (SELECT string_agg(concat_ws(',', tg.tgname, tg.tgenabled, tg.tgfoid, tg.xmin, p.xmin), ';' ORDER BY tg.tgname)
                       FROM pg_trigger tg LEFT JOIN pg_proc p ON p.oid = tg.tgfoid
                      WHERE tg.tgrelid = rel
                        AND tg.tgname = ANY (ARRAY[pgsketch.capture_trigger(r, 'ins'), pgsketch.capture_trigger(r, 'upd'),
                                                   pgsketch.capture_trigger(r, 'del'), pgsketch.capture_trigger(r, 'trunc')])))
      INTO fp FROM pg_class c WHERE c.oid = rel;
    RETURN fp;
END $$;

-- capture_drift says in words how fingerprint now differs from was, the
-- fingerprint of relation rel as the last refresh recorded it, or NULL
-- when they are the same.
CREATE FUNCTION pgsketch.capture_drift(rel regclass, was jsonb, now jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN CASE
        WHEN was IS NULL THEN
            'no definition of its source was recorded at its last refresh (pgsketch was upgraded since); the next refresh rebuilds it'
        WHEN was->'security' IS DISTINCT FROM now->'security' THEN
            format('row-level security of %s was enabled, disabled or forced since its last refresh', rel)
        WHEN was->'columns' IS DISTINCT FROM now->'columns' THEN
            format('%s since its last refresh', (
                SELECT string_agg(format('column %I of %s was %s', k, rel,
                           CASE WHEN now->'columns'->>k IS NULL THEN 'dropped or renamed'
                                ELSE 'altered (its type, position, collation, NOT NULL or a rewrite)' END), '; ' ORDER BY k)
                  FROM jsonb_object_keys(was->'columns') k
                 WHERE was->'columns'->k IS DISTINCT FROM now->'columns'->k))
        WHEN was->'triggers' IS DISTINCT FROM now->'triggers' THEN
            format('its change capture triggers on %s, or their function, were disabled, enabled, dropped, re-created or replaced since its last refresh', rel)
        WHEN was IS DISTINCT FROM now THEN
            format('the definition of %s changed since its last refresh', rel)
    END;

-- require_source_read returns true when the current role may read what
-- rollup r holds: the source has no row-level security and the role may
-- SELECT it (or every column r reads). Otherwise it fails with SQLSTATE
-- 42501. The policy of every rollup and level table asks it once per
-- statement (an uncorrelated subquery), and so does capture_check.
CREATE FUNCTION pgsketch.require_source_read(r text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    c text;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format('pgsketch: permission denied: rollup %s does not exist', r);
    END IF;
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    IF src IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('pgsketch: permission denied for rollup %s: its source %I.%I does not exist', r, d.source_schema, d.source_table);
    END IF;
    IF (SELECT relrowsecurity FROM pg_class WHERE oid = src) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('pgsketch: permission denied for rollup %s: its source %s has row-level security enabled', r, src),
            HINT = format('Query %s itself: PostgreSQL applies its policies.', src);
    END IF;
    IF NOT has_table_privilege(src, 'SELECT') THEN
        FOREACH c IN ARRAY pgsketch.read_columns(d) LOOP
            IF pgsketch.base_type(src, c) IS NULL OR NOT has_column_privilege(src, c, 'SELECT') THEN
                RAISE EXCEPTION USING ERRCODE = '42501',
                    MESSAGE = format('permission denied for table %s (pgsketch: rollup %s holds its aggregates)', src, r);
            END IF;
        END LOOP;
    END IF;
    RETURN true;
END $$;

-- protect_tables gives rollup r's table and each of its level tables
-- row-level security with the one policy pgsketch_source_readers: a role
-- reads their rows only while require_source_read lets it. Only their
-- owner can; a role that cannot gets a WARNING and the tables stay as they
-- were (the next refresh by their owner tries again).
CREATE FUNCTION pgsketch.protect_tables(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT x FROM (
                 SELECT to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table)) AS x, 0 AS o
                   FROM pgsketch.rollup_defs d WHERE d.name = r
                 UNION ALL
                 SELECT to_regclass(format('%I.%I', l.table_schema, l.table_name)), 1
                   FROM pgsketch.rollup_levels l WHERE l.rollup = r) AS tabs
              WHERE x IS NOT NULL ORDER BY o, x::text LOOP
        CONTINUE WHEN (SELECT relrowsecurity FROM pg_class WHERE oid = t)
            AND EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = t AND p.polname = 'pgsketch_source_readers');
        IF NOT pg_has_role((SELECT relowner FROM pg_class WHERE oid = t), 'USAGE') THEN
            RAISE WARNING 'pgsketch: cannot protect % of rollup % with row-level security: only its owner can', t, r;
            CONTINUE;
        END IF;
        EXECUTE format('DROP POLICY IF EXISTS pgsketch_source_readers ON %s', t);
        EXECUTE format('CREATE POLICY pgsketch_source_readers ON %s FOR SELECT TO PUBLIC USING ((SELECT pgsketch.require_source_read(%L)))', t, r);
        EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
    END LOOP;
END $$;

-- sync_grants (version 11): version 3's, refusing a source distributed by
-- Citus, then the tables' policy (protect_tables).
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
    PERFORM pgsketch.raise_unless(NOT pgsketch.distributed(src), '0A000',
        format('%s is distributed by Citus: pgsketch cannot capture its changes yet', src),
        'Query it through pgsketch-proxy: it is answered exactly.');
    PERFORM pgsketch.copy_select_grants(src, dst);
    FOR l IN SELECT * FROM pgsketch.rollup_levels AS x WHERE x.rollup = sync_grants.rollup ORDER BY x.grain LOOP
        dst := to_regclass(format('%I.%I', l.table_schema, l.table_name));
        PERFORM pgsketch.raise_unless(dst IS NOT NULL, '42P01',
            format('level table %I.%I of rollup %L does not exist', l.table_schema, l.table_name, rollup),
            format('Drop the level with SELECT pgsketch.drop_rollup_level(%L, %L) and add it again.', rollup, l.grain));
        PERFORM pgsketch.copy_select_grants(src, dst);
    END LOOP;
    PERFORM pgsketch.protect_tables(rollup);
END $$;

-- capture_logged_setting names the setting in which a transaction's
-- capture triggers of rollup r remember the last bucket they logged.
CREATE FUNCTION pgsketch.capture_logged_setting(r text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN 'pgsketch.logged_' || r;

-- capture_body is the body of rollup d's trigger function for a time
-- column of type ttype. The statement's earliest and latest times come
-- first (one pass); a large statement within 64 buckets (a bulk load)
-- logs every bucket between them without reading its rows again; any
-- other logs the distinct buckets of its rows. Hourly buckets in a zone
-- other than UTC always take the second way (date_trunc keeps each row's
-- offset there). Every read is inside a block that traps errors: a
-- failure is recorded in pgsketch.rollup_faults (the rollup is then
-- answered exactly until a full rebuild) and the user's statement goes on.
CREATE FUNCTION pgsketch.capture_body(d pgsketch.rollup_defs, ttype text) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN format($f$
DECLARE
    lo %9$s;
    hi %9$s;
    nrows bigint;
    buckets timestamptz[];
    failed text;
BEGIN
    BEGIN
        IF TG_OP = 'TRUNCATE' THEN
            -- Every bucket the rollup holds.
            SELECT array_agg(DISTINCT %6$s) INTO buckets FROM %7$I.%8$I;
        ELSE
            IF TG_OP = 'INSERT' THEN
                SELECT min(x.%4$I), max(x.%4$I), count(*) INTO lo, hi, nrows FROM pgsketch_new x;
            ELSIF TG_OP = 'DELETE' THEN
                SELECT min(x.%4$I), max(x.%4$I), count(*) INTO lo, hi, nrows FROM pgsketch_old x;
            ELSE
                SELECT min(x.t), max(x.t), count(*) INTO lo, hi, nrows
                  FROM (SELECT o.%4$I FROM pgsketch_old o UNION ALL SELECT w.%4$I FROM pgsketch_new w) AS x(t);
            END IF;
            IF lo IS NULL THEN
                buckets := NULL; -- no row with a time: no bucket
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
        pgsketch.capture_logged_setting(d.name));

-- capture_define creates or replaces rollup r's trigger function when its
-- text would differ from the one in place (none yet, or the time column's
-- type changed), SECURITY DEFINER (owned by the role preparing the
-- capture, which may write the log) with a pinned search_path, EXECUTE
-- revoked from PUBLIC. It returns whether it wrote the function.
CREATE FUNCTION pgsketch.capture_define(r text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    ttype text;
    body text;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    PERFORM pgsketch.raise_unless(src IS NOT NULL, '42P01',
        format('source table %I.%I of rollup %L does not exist', d.source_schema, d.source_table, r));
    ttype := pgsketch.base_type(src, d.time_column);
    PERFORM pgsketch.raise_unless(ttype IN ('date', 'timestamp without time zone', 'timestamp with time zone'), '42804',
        format('time column %I of %s is missing or no longer a date, timestamp or timestamptz', d.time_column, src));
    body := pgsketch.capture_body(d, ttype);
    IF (SELECT p.prosrc FROM pg_proc p WHERE p.oid = to_regprocedure(pgsketch.capture_function(r) || '()')) IS NOT DISTINCT FROM body THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER '
                   'SET search_path = pg_catalog, pg_temp AS %L', pgsketch.capture_function(r), body);
    EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', pgsketch.capture_function(r));
    RETURN true;
END $$;

-- capture_prepare (version 11): refuses a distributed source, writes the
-- trigger function anew when its text would differ, and waits at most
-- ddl_lock_timeout for the locks its triggers take; then version 6's.
ALTER FUNCTION pgsketch.capture_prepare(text) RENAME TO capture_prepare_v6;
CREATE FUNCTION pgsketch.capture_prepare(r text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    PERFORM pgsketch.raise_unless(FOUND, '42704', format('rollup %L does not exist', r));
    src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
    PERFORM pgsketch.raise_unless(src IS NOT NULL, '42P01',
        format('source table %I.%I of rollup %L does not exist', d.source_schema, d.source_table, r));
    PERFORM pgsketch.raise_unless(NOT pgsketch.distributed(src), '0A000',
        format('%s is distributed by Citus: pgsketch cannot capture its changes yet', src),
        'Query it through pgsketch-proxy: it is answered exactly.');
    IF (SELECT relkind FROM pg_class WHERE oid = src) IN ('r', 'p') THEN
        PERFORM pgsketch.capture_define(r);
    END IF;
    RETURN pgsketch.capture_prepare_v6(r);
END $$;

-- capture_remove (version 11): version 6's, waiting at most
-- ddl_lock_timeout for each trigger's lock.
ALTER FUNCTION pgsketch.capture_remove(text) RENAME TO capture_remove_v6;
CREATE FUNCTION pgsketch.capture_remove(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
    PERFORM pgsketch.capture_remove_v6(r);
END $$;

-- capture_reconcile (version 11): version 6's, and a full rebuild also
-- when a captured relation's definition differs from the one recorded
-- (or none was) or a capture trigger failed on a write; then it records
-- each relation's fingerprint and clears the faults.
ALTER FUNCTION pgsketch.capture_reconcile(text) RENAME TO capture_reconcile_v6;
CREATE FUNCTION pgsketch.capture_reconcile(r text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    cols text[];
    drift boolean;
    full_rebuild boolean;
BEGIN
    SELECT * INTO d FROM pgsketch.rollup_defs WHERE name = r;
    cols := pgsketch.read_columns(d);
    drift := EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = r)
          OR EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r
                      AND c.fingerprint IS DISTINCT FROM pgsketch.capture_fingerprint(r, c.relid, cols));
    full_rebuild := pgsketch.capture_reconcile_v6(r);
    UPDATE pgsketch.rollup_captured c SET fingerprint = pgsketch.capture_fingerprint(r, c.relid, cols) WHERE c.rollup = r;
    DELETE FROM pgsketch.rollup_faults f WHERE f.rollup = r;
    IF drift AND NOT full_rebuild THEN
        RAISE NOTICE 'rollup %: the definition of its source changed, or its capture failed on a write, since its last refresh: rebuilding every bucket', r;
    END IF;
    RETURN full_rebuild OR drift;
END $$;

-- capture_broken (version 11): version 10's verdicts, and a source
-- distributed by Citus, a write whose buckets the capture could not
-- compute, or a relation whose definition differs from the fingerprint
-- recorded at the last refresh (which covers its capture triggers' state:
-- one disabled, dropped or re-created is a change). Every answering
-- statement runs it: each relation is compared in one query, with the
-- columns the fingerprint recorded.
CREATE OR REPLACE FUNCTION pgsketch.capture_broken(r text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    rels oid[];
    ncaptured bigint;
    has_src boolean;
    bad record;
    why text;
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
    IF pgsketch.distributed(src) THEN
        RETURN format('its source %s is distributed by Citus, whose changes pgsketch cannot capture yet', src);
    END IF;
    SELECT count(*), coalesce(bool_or(c.relid = src), false) INTO ncaptured, has_src
      FROM pgsketch.rollup_captured c WHERE c.rollup = r;
    IF ncaptured = 0 THEN
        RETURN 'it has not been refreshed with change capture yet';
    END IF;
    IF NOT has_src THEN
        RETURN format('%s is not the table it was refreshed from (dropped and re-created, or swapped by RENAME)', src);
    END IF;
    SELECT format('its change capture failed on a write since its last refresh (%s)', f.message) INTO why
      FROM pgsketch.rollup_faults f WHERE f.rollup = r ORDER BY f.at LIMIT 1;
    IF why IS NOT NULL THEN
        RETURN why;
    END IF;
    -- The source and every relation under it (pgsketch.capture_rels).
    rels := ARRAY(WITH RECURSIVE t(relid) AS (
                      SELECT src::oid
                      UNION
                      SELECT i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.relid)
                  SELECT relid FROM t);
    -- The first relation not captured or not as the last refresh saw it.
    SELECT x.relid, c.relid IS NOT NULL AS captured, c.fingerprint AS was, f.fp AS now INTO bad
      FROM unnest(rels) AS x(relid)
      LEFT JOIN pgsketch.rollup_captured c ON c.rollup = r AND c.relid = x.relid
      LEFT JOIN LATERAL (SELECT pgsketch.capture_fingerprint(r, x.relid,
                                    ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns'))) AS fp
                          WHERE c.fingerprint IS NOT NULL) AS f ON true
     WHERE c.relid IS NULL OR c.fingerprint IS NULL OR c.fingerprint <> f.fp
     LIMIT 1;
    IF FOUND THEN
        IF NOT bad.captured THEN
            RETURN format('%s was attached to or created in %s since its last refresh', bad.relid::regclass, src);
        END IF;
        RETURN pgsketch.capture_drift(bad.relid::regclass, bad.was, bad.now);
    END IF;
    IF ncaptured > cardinality(rels) OR EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r AND c.relid <> ALL (rels)) THEN
        RETURN format('a partition or child of %s was detached or dropped since its last refresh', src);
    END IF;
    RETURN NULL;
END $$;

-- capture_check (version 11): the role's right to read what the rollup
-- holds first (require_source_read: SQLSTATE 42501, upon which
-- pgsketch-proxy sends the statement to PostgreSQL, which answers it or
-- refuses it by its own rules), then version 6's verdict.
ALTER FUNCTION pgsketch.capture_check(text, timestamptz, timestamptz) RENAME TO capture_check_v6;
CREATE FUNCTION pgsketch.capture_check(r text, lo timestamptz, hi timestamptz) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    why text;
    n bigint;
BEGIN
    PERFORM pgsketch.require_source_read(r);
    why := pgsketch.capture_broken(r);
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

-- rebuild_refused says why rollup d's table cannot be rebuilt in place from
-- source src any more, or NULL: a new rollup would give its columns other
-- types (the bucket the time column's, each dimension its column's), or a
-- dimension or sketched column is no longer of a type pgsketch can hold
-- exactly. The rollup must then be dropped and created again.
CREATE FUNCTION pgsketch.rebuild_refused(d pgsketch.rollup_defs, src regclass, dst regclass) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT string_agg(x, '; ') FROM (
        SELECT format('column %I of %s is of type %s, the rollup table''s column %I of type %s', c.name, src,
                      format_type(s.atttypid, CASE WHEN c.i = 1 THEN NULL ELSE s.atttypmod END),
                      t.attname, format_type(t.atttypid, t.atttypmod)) AS x
          FROM unnest(d.time_column || d.dimensions) WITH ORDINALITY AS c(name, i)
          JOIN pg_attribute s ON s.attrelid = src AND s.attname = c.name AND s.attnum > 0 AND NOT s.attisdropped
          JOIN pg_attribute t ON t.attrelid = dst AND t.attname = CASE WHEN c.i = 1 THEN 'bucket' ELSE c.name END
                             AND t.attnum > 0 AND NOT t.attisdropped
         WHERE format_type(s.atttypid, CASE WHEN c.i = 1 THEN NULL ELSE s.atttypmod END)
               <> format_type(t.atttypid, CASE WHEN c.i = 1 THEN NULL ELSE t.atttypmod END)
        UNION ALL
        SELECT format('column %I of %s (type %s) can no longer be held exactly', c.name, src, pgsketch.column_type(src, c.name))
          FROM unnest(d.dimensions || ARRAY(SELECT m.expression FROM pgsketch.rollup_measures m
                                             WHERE m.rollup = d.name AND m.kind IN ('hll', 'theta', 'topk'))) AS c(name)
         WHERE pgsketch.column_type(src, c.name) IS NOT NULL AND NOT pgsketch.exact_column(src, c.name)) AS y);

-- refresh_begin (version 11): version 7's, but for a logged bucket that is
-- not finite (-infinity: a row dated so), which is re-read by equality on
-- the time column.
ALTER FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer) RENAME TO refresh_begin_v7;
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
    PERFORM pgsketch.raise_unless(pgsketch.rebuild_refused(d, src, dst) IS NULL, '42804',
        format('rollup %s cannot be refreshed: %s', r, pgsketch.rebuild_refused(d, src, dst)),
        format('Drop it (SELECT pgsketch.drop_rollup(%L)) and create it again.', r));
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
    PERFORM set_config(pgsketch.capture_logged_setting(r), '', true);
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
            (SELECT string_agg(CASE WHEN NOT isfinite(b)
                    THEN format('%1$I = %2$L::%3$s', d.time_column,
                                CASE ttype WHEN 'timestamp with time zone' THEN b::text ELSE (b AT TIME ZONE 'UTC')::text END, ttype)
                    WHEN ttype = 'timestamp with time zone'
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


-- Every rollup's capture function in its new form, and its tables'
-- policy. Each in a block of its own: one the migrating role may not
-- change (another role owns it) keeps its old form until its owner's next
-- refresh, with a WARNING; its rollup is answered exactly until then all
-- the same (no fingerprint is recorded yet).
DO $do$
DECLARE
    r text;
    why text;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        BEGIN
            IF to_regprocedure(pgsketch.capture_function(r) || '()') IS NOT NULL THEN
                PERFORM pgsketch.capture_define(r);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            why := SQLERRM;
            -- No function can be made from the definition (its time column
            -- is gone): one that only marks the rollup, so that the
            -- earlier one no longer fails the table's writes.
            BEGIN
                EXECUTE format($f$CREATE OR REPLACE FUNCTION %1$s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = pg_catalog, pg_temp AS $body$
BEGIN
    INSERT INTO pgsketch.rollup_faults (rollup, relid, message)
    SELECT %2$L, TG_RELID, format('%%s on %%I.%%I: no capture function could be made: %%s', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, %3$L)
     WHERE NOT EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = %2$L);
    RETURN NULL;
END
$body$$f$, pgsketch.capture_function(r), r, why);
                RAISE WARNING 'pgsketch: rollup %: no capture function could be made (%); its writes mark it unusable until it is dropped or repaired', r, why;
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'pgsketch: the capture function of rollup % keeps its old form until its next refresh: %', r, SQLERRM;
            END;
        END;
        BEGIN
            PERFORM pgsketch.protect_tables(r);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgsketch: the tables of rollup % get their policy at its next refresh: %', r, SQLERRM;
        END;
    END LOOP;
END $do$;
