-- pgsketch catalog objects, version 20: change capture on a source table
-- that Citus distributes by hash, through a change log distributed with
-- it.
--
-- * Writes to a distributed table run on the workers, in the shards'
--   transactions, where pgsketch's catalog does not exist. Each such
--   rollup gets a log of its own, pgsketch.log_<rollup> (key, bucket,
--   consumed), distributed by key and co-located with the source: the
--   capture trigger, which Citus copies onto every shard, computes its
--   statement's buckets as on one node and inserts them with the
--   distribution value of one of the statement's rows (all rows of a
--   statement on a shard belong to it), so Citus routes the insert to the
--   log's shard on the same worker, in the write's own transaction: a
--   write and its log rows commit or roll back together.
-- * A TRUNCATE issued on the
--   coordinator fires the coordinator's trigger, which logs every bucket
--   the rollup holds in pgsketch.rollup_dirty, as on one node; one issued
--   on a worker fires the worker's copy, which notes the rollup in
--   pgsketch.rollup_truncated, a Citus reference table (every node reads
--   and writes it): the rollup is not answered from until a refresh
--   rebuilds it whole.
-- * Rows a shard move or rebalance copies fire no trigger (Citus copies
--   them under session_replication_role = replica, and its logical
--   replication applies them the same way): the log's shards move with
--   the source's, rows and all. The trigger returns at once under
--   session_replication_role = replica, so that a write replayed on a new
--   placement is not logged twice.
-- * The log holds the source's distribution values. Only the role that
--   prepared the capture (the trigger function's owner) and the owner of
--   pgsketch.shard_logged read it; everyone else reads its buckets through
--   that function, as the change log pgsketch.rollup_dirty is readable by
--   every role.
-- * Every answering statement reads the log (capture_check and the fetch's
--   changed buckets, through shard_logged): one query over every shard.
--   Citus reads each shard in a snapshot of its own, taken when the query
--   reaches it, after the coordinator's: a refresh that committed on the
--   workers after a statement's snapshot on the coordinator was taken may
--   have drained log rows whose changes that snapshot's rollup rows do not
--   hold. So a refresh does not delete the rows it drains: it marks them
--   with the version it makes (consumed), and a statement ignores only
--   rows marked with a version up to the one its own snapshot sees. Rows
--   are deleted once the version that drained them has been committed for
--   shard_log_keep() (shard_drains records when a refresh first saw each
--   version committed), and a statement whose snapshot is older than that
--   is not answered from the rollup.
-- * A table distributed after its rollup's last refresh keeps the form of
--   capture it had (whose copies on the shards log nothing): capture_broken
--   says so, and the next refresh prepares the capture anew and rebuilds
--   every bucket (the triggers' fingerprint changed).

-- shard_log names rollup r's change log on a distributed source (in
-- schema pgsketch).
CREATE FUNCTION pgsketch.shard_log(r text) RETURNS text
    LANGUAGE sql IMMUTABLE
    RETURN 'log_' || r;

-- shard_log_keep is how long the log keeps the rows a refresh drained
-- after the version that drained them was committed; a statement whose
-- snapshot is older is answered exactly.
CREATE FUNCTION pgsketch.shard_log_keep() RETURNS interval
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN interval '1 hour';

-- shard_drains records, per rollup on a distributed source, when a refresh
-- first found each version committed (so that the log rows that version
-- drained may be deleted shard_log_keep() later).
CREATE TABLE pgsketch.shard_drains (
    rollup text NOT NULL,
    version bigint NOT NULL,
    seen_at timestamptz NOT NULL,
    PRIMARY KEY (rollup, version)
);
COMMENT ON TABLE pgsketch.shard_drains IS
    'pgsketch: when a refresh of a rollup on a distributed source first found each of its versions committed';

-- rollup_truncated lists the rollups whose distributed source was
-- truncated on a worker since their last refresh. It becomes a Citus
-- reference table when the first distributed source is captured.
CREATE TABLE pgsketch.rollup_truncated (
    rollup text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE pgsketch.rollup_truncated IS
    'pgsketch: rollups whose source Citus distributes and which was truncated on a worker since their last refresh';
GRANT SELECT ON pgsketch.rollup_truncated TO PUBLIC;

-- hash_distribution is the distribution column of rel when Citus
-- distributes it by hash with one placement per shard, else NULL (a
-- reference table, a table whose shards are replicated by statement, one
-- merely added to Citus's metadata).
CREATE FUNCTION pgsketch.hash_distribution(rel oid) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    hashed boolean;
    col text;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT p.partmethod = ''h'' AND p.repmodel = ''s'' FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1::regclass'
       INTO hashed USING rel;
    IF hashed IS NOT TRUE THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT column_to_column_name(p.logicalrelid, p.partkey) FROM pg_catalog.pg_dist_partition p
              WHERE p.logicalrelid = $1::regclass'
       INTO col USING rel;
    RETURN col;
END $$;

-- shard_log_broken says why rollup r's log on its distributed source src
-- cannot capture its changes, or NULL: the source is not distributed by
-- hash, or the log is missing or not distributed with it.
CREATE FUNCTION pgsketch.shard_log_broken(r text, src regclass) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
    same boolean;
BEGIN
    IF pgsketch.hash_distribution(src) IS NULL THEN
        RETURN format('its source %s is distributed by Citus other than by hash with one placement per shard (a reference table, replicated shards, or added to Citus''s metadata), whose changes pgsketch cannot capture', src);
    END IF;
    IF tbl IS NULL THEN
        RETURN format('its source %s was distributed by Citus since its last refresh', src);
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition l JOIN pg_catalog.pg_dist_partition s ON s.colocationid = l.colocationid
                             WHERE l.logicalrelid = $1::regclass AND s.logicalrelid = $2::regclass AND l.partmethod = ''h'')'
       INTO same USING tbl, src;
    IF NOT same THEN
        RETURN format('its change log %s is not distributed with its source %s', tbl, src);
    END IF;
    RETURN NULL;
END $$;

-- shard_logged returns the buckets rollup r's log on a distributed source
-- lists as changed since the version of the rollup this statement's
-- snapshot sees (none without a log): the buckets, not the distribution
-- values beside them, for any role. A statement whose snapshot may be older
-- than the rows the log keeps fails with SQLSTATE 55000 (the proxy then
-- answers it exactly).
CREATE FUNCTION pgsketch.shard_logged(r text) RETURNS SETOF timestamptz
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
    seen bigint := (SELECT d.version FROM pgsketch.rollup_defs d WHERE d.name = r);
BEGIN
    IF tbl IS NULL THEN
        RETURN;
    END IF;
    -- The snapshot is the statement's under READ COMMITTED, else the
    -- transaction's.
    IF (clock_timestamp() - CASE WHEN current_setting('transaction_isolation') = 'read committed' THEN statement_timestamp()
                                 ELSE transaction_timestamp() END) > pgsketch.shard_log_keep() THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('pgsketch: rollup %s not used: this snapshot is older than %s, the time its source''s shards keep their changes logged',
                             r, pgsketch.shard_log_keep());
    END IF;
    RETURN QUERY EXECUTE format('SELECT DISTINCT x.bucket FROM %s x WHERE x.consumed IS NULL OR x.consumed > $1', tbl) USING seen;
END $$;
REVOKE ALL ON FUNCTION pgsketch.shard_logged(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsketch.shard_logged(text) TO PUBLIC;

-- shard_faults says why rollup r's capture on a distributed source missed
-- a change since its last refresh (a TRUNCATE issued on a worker), or NULL.
-- It reads only the coordinator's copy of pgsketch.rollup_truncated.
CREATE FUNCTION pgsketch.shard_faults(r text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT FROM pgsketch.rollup_truncated t WHERE t.rollup = r) THEN
        RETURN 'its source was truncated on a Citus worker since its last refresh';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION pgsketch.shard_faults(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsketch.shard_faults(text) TO PUBLIC;

-- shard_log_define creates rollup r's log on its distributed source src
-- when it has none, distributed by the source's distribution column and
-- co-located with it, readable by shard_logged's owner; and makes
-- rollup_truncated a reference table.
CREATE FUNCTION pgsketch.shard_log_define(r text, src regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    col text := pgsketch.hash_distribution(src);
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
    ref boolean;
BEGIN
    PERFORM pgsketch.raise_unless(col IS NOT NULL, '0A000',
        format('%s is distributed by Citus other than by hash with one placement per shard: pgsketch captures the changes of such tables only', src));
    IF tbl IS NOT NULL AND pgsketch.shard_log_broken(r, src) IS NOT NULL THEN
        -- A log no longer distributed with its source (the source was
        -- distributed anew, or moved to another co-location group) may
        -- hold changes not drained yet, and has logged nothing since:
        -- the next refresh rebuilds every bucket.
        INSERT INTO pgsketch.rollup_faults (rollup, relid, message)
        SELECT r, src, format('its change log %s was no longer distributed with %s', tbl, src)
         WHERE NOT EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = r);
        EXECUTE format('DROP TABLE %s', tbl);
        tbl := NULL;
    END IF;
    IF tbl IS NULL THEN
        -- The key of the distribution column's type, modifier and
        -- collation, as Citus requires of tables distributed together.
        EXECUTE format('CREATE TABLE pgsketch.%I (key %s NOT NULL, bucket timestamptz NOT NULL, consumed bigint)',
                       pgsketch.shard_log(r),
                       (SELECT format_type(a.atttypid, a.atttypmod)
                               || CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                                       THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END
                          FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                         WHERE a.attrelid = src AND a.attname = col));
        tbl := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
        EXECUTE 'SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)' USING tbl::text, 'key', src::text;
        EXECUTE format('GRANT SELECT ON %s TO %I', tbl,
                       (SELECT p.proowner::regrole::text FROM pg_proc p WHERE p.oid = 'pgsketch.shard_logged(text)'::regprocedure));
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = ''pgsketch.rollup_truncated''::regclass)' INTO ref;
    IF NOT ref THEN
        PERFORM create_reference_table('pgsketch.rollup_truncated');
    END IF;
END $$;

-- capture_body_shards is the body of rollup d's capture function on a
-- source Citus distributes by hash, whose time column is of type ttype and
-- distribution column col. On a shard it computes its statement's buckets
-- as on one node (capture_body) and inserts them into the rollup's log
-- with the distribution value of one of the statement's rows, so that the
-- insert runs on this node, in the write's transaction. It traps no error
-- (Citus would send a SAVEPOINT over connections a statement issued here
-- may be streaming on): what could fail is checked first, and a statement
-- it cannot log is let through unlogged only where the coordinator sees
-- why and answers exactly (a column of the table altered: its definition
-- changed; the log not distributed with the table any more). The copy of
-- the trigger on the coordinator's table fires only for a TRUNCATE issued
-- there and logs every bucket the rollup holds; a TRUNCATE issued on a
-- worker notes the rollup in pgsketch.rollup_truncated.
CREATE FUNCTION pgsketch.capture_body_shards(d pgsketch.rollup_defs, ttype text, col text) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN format($f$
DECLARE
    lo %9$s;
    hi %9$s;
    nrows bigint;
    buckets timestamptz[];
    k %19$s;
    here integer;
    logshard bigint;
    nested text;
BEGIN
    -- A row a shard move replays on the new placement was logged where it
    -- was written; the log's shard moves with the source's.
    IF current_setting('session_replication_role') = 'replica' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        IF to_regclass('pgsketch.rollup_defs') IS NOT NULL THEN
            -- On the coordinator: every bucket the rollup holds.
            INSERT INTO pgsketch.rollup_dirty (rollup, bucket)
            SELECT DISTINCT %2$L, %6$s FROM %7$I.%8$I;
        ELSIF current_setting('application_name') NOT LIKE 'citus\_internal%%' THEN
            -- Issued on a worker, which has no rollup: rebuilt whole. (The
            -- copies of this trigger on the other nodes fire too, in
            -- Citus's own sessions, and note nothing.) Citus refuses a
            -- write to another node from a trigger on a shard's node
            -- unless allowed: a reference table's rows do not move.
            nested := current_setting('citus.allow_nested_distributed_execution');
            PERFORM set_config('citus.allow_nested_distributed_execution', 'on', true);
            INSERT INTO pgsketch.rollup_truncated (rollup) VALUES (%2$L);
            PERFORM set_config('citus.allow_nested_distributed_execution', nested, true);
        END IF;
        RETURN NULL;
    END IF;
    -- The columns read, as this function was written for them.
    IF (SELECT count(*) FROM pg_attribute a
         WHERE a.attrelid = TG_RELID AND a.attnum > 0 AND NOT a.attisdropped
           AND (a.attname, a.atttypid, a.atttypmod) IN (%20$s)) <> %21$s THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        SELECT o.%18$I INTO k FROM pgsketch_old o LIMIT 1;
    ELSE
        SELECT n.%18$I INTO k FROM pgsketch_new n LIMIT 1;
    END IF;
    IF NOT FOUND THEN
        RETURN NULL; -- no row: nothing changed
    END IF;
    -- The log's shard for k, here and nowhere else.
    SELECT groupid INTO here FROM pg_dist_local_group;
    logshard := get_shard_id_for_distribution_column(%22$L, k);
    IF NOT EXISTS (SELECT FROM pg_dist_placement p WHERE p.shardid = logshard AND p.groupid = here)
       OR EXISTS (SELECT FROM pg_dist_placement p WHERE p.shardid = logshard AND p.groupid <> here) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT min(x.%4$I), max(x.%4$I), count(*) INTO lo, hi, nrows FROM pgsketch_new x;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT min(x.%4$I), max(x.%4$I), count(*) INTO lo, hi, nrows FROM pgsketch_old x;
    ELSE
        SELECT min(x.t), max(x.t), count(*) INTO lo, hi, nrows
          FROM (SELECT o.%4$I FROM pgsketch_old o UNION ALL SELECT w.%4$I FROM pgsketch_new w) AS x(t);
    END IF;
    IF lo IS NULL THEN
        RETURN NULL; -- no row with a time: no bucket
    ELSIF %15$s = %16$s THEN
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
    IF cardinality(buckets) = 1 THEN
        -- A statement of one bucket logs it once per transaction and
        -- shard (the setting, local to this node's session, remembers the
        -- last one logged).
        IF current_setting(%23$L, true) IS DISTINCT FROM k::text || ' ' || extract(epoch FROM buckets[1])::text THEN
            INSERT INTO pgsketch.%17$I (key, bucket) VALUES (k, buckets[1]);
            PERFORM set_config(%23$L, k::text || ' ' || extract(epoch FROM buckets[1])::text, true);
        END IF;
    ELSIF buckets IS NOT NULL THEN
        INSERT INTO pgsketch.%17$I (key, bucket) SELECT k, b FROM unnest(buckets) AS b;
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
        pgsketch.shard_log(d.name),
        col,
        (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
          WHERE a.attrelid = to_regclass(format('%I.%I', d.source_schema, d.source_table)) AND a.attname = col),
        (SELECT string_agg(format('(%L, %s, %s)', a.attname, a.atttypid, a.atttypmod), ', ')
           FROM pg_attribute a
          WHERE a.attrelid = to_regclass(format('%I.%I', d.source_schema, d.source_table))
            AND a.attname IN (d.time_column, col) AND a.attnum > 0 AND NOT a.attisdropped),
        (SELECT count(DISTINCT c) FROM unnest(ARRAY[d.time_column, col]) AS c),
        format('pgsketch.%I', pgsketch.shard_log(d.name)),
        pgsketch.capture_logged_setting(d.name));

-- capture_body (version 20): on a source Citus distributes by hash,
-- capture_body_shards; elsewhere version 19's.
ALTER FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text) RENAME TO capture_body_v19;
CREATE FUNCTION pgsketch.capture_body(d pgsketch.rollup_defs, ttype text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    col text := pgsketch.hash_distribution(to_regclass(format('%I.%I', d.source_schema, d.source_table)));
BEGIN
    IF col IS NOT NULL THEN
        RETURN pgsketch.capture_body_shards(d, ttype, col);
    END IF;
    RETURN pgsketch.capture_body_v19(d, ttype);
END $$;

-- capture_prepare (version 20): on a source Citus distributes by hash, the
-- rollup's log first (shard_log_define), then the trigger function and
-- triggers as on one node, which Citus copies onto every shard; elsewhere
-- version 18's, which still refuses any other distributed source.
ALTER FUNCTION pgsketch.capture_prepare(text) RENAME TO capture_prepare_v18;
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
    IF src IS NULL OR pgsketch.hash_distribution(src) IS NULL THEN
        RETURN pgsketch.capture_prepare_v18(r);
    END IF;
    PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
    -- Citus creates a trigger on a distributed table, and copies it onto
    -- the shards, only with this setting.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    -- The log is created before the function, which Citus creates on every
    -- node: over one connection per node, as Citus requires for that.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pgsketch.shard_log_define(r, src);
    PERFORM pgsketch.capture_define(r);
    RETURN pgsketch.capture_prepare_v6(r);
END $$;

-- sync_grants (version 20): version 11's, refusing only a source Citus
-- distributes other than by hash.
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
    PERFORM pgsketch.raise_unless(NOT pgsketch.distributed(src) OR pgsketch.hash_distribution(src) IS NOT NULL, '0A000',
        format('%s is distributed by Citus other than by hash with one placement per shard: pgsketch captures the changes of such tables only', src),
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

-- capture_broken (version 20): version 13's verdicts, but a source Citus
-- distributes by hash is captured when its log is in place and no write
-- failed to log (shard_log_broken, shard_faults).
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
    dist regclass;
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
    -- The source, then the rollup's own tables, in one look at Citus's
    -- catalog.
    dist := pgsketch.distributed_first(r, src);
    IF dist = src THEN
        why := coalesce(pgsketch.shard_log_broken(r, src), pgsketch.shard_faults(r));
        IF why IS NOT NULL THEN
            RETURN why;
        END IF;
        dist := pgsketch.distributed_first(r, NULL);
    END IF;
    IF dist IS NOT NULL THEN
        RETURN format('its table %s is distributed by Citus: pgsketch keeps rollup tables local on the coordinator', dist);
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

-- capture_check_inserts (version 20): version 18's, counting the buckets
-- of the log on a distributed source too.
ALTER FUNCTION pgsketch.capture_check_inserts(text, timestamptz, timestamptz) RENAME TO capture_check_inserts_v18;
CREATE FUNCTION pgsketch.capture_check_inserts(r text, lo timestamptz, hi timestamptz) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint := pgsketch.capture_check_inserts_v18(r, lo, hi);
BEGIN
    IF to_regclass(format('pgsketch.%I', pgsketch.shard_log(r))) IS NULL THEN
        RETURN n;
    END IF;
    SELECT count(DISTINCT u.b) INTO n
      FROM (SELECT x.bucket FROM pgsketch.rollup_dirty x WHERE x.rollup = r
            UNION ALL
            SELECT s.b FROM pgsketch.shard_logged(r) s(b)) AS u(b)
     WHERE (lo IS NULL OR u.b >= lo) AND (hi IS NULL OR u.b < hi);
    IF n > pgsketch.max_dirty_buckets() THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('pgsketch: rollup %s not used: %s of the buckets in the range changed since its last refresh (more than %s)',
                             r, n, pgsketch.max_dirty_buckets()),
            HINT = format('SELECT pgsketch.refresh_rollup(%L) through pgsketch-proxy brings it up to date.', r);
    END IF;
    RETURN n;
END $$;
COMMENT ON FUNCTION pgsketch.capture_check_inserts(text, timestamptz, timestamptz) IS
    'the number of logged buckets in [lo, hi) of rollup r, failing (42501, 55000) where the role may not read its source or its change capture is not in place';

-- refresh_begin (version 20): the rows of the rollup's log on a
-- distributed source not drained yet are marked with the version this
-- refresh makes, and their buckets logged in pgsketch.rollup_dirty (a
-- TRUNCATE on a worker as a fault, which rebuilds every bucket); rows drained by a version committed for shard_log_keep()
-- are deleted. Then version 19's, which drains rollup_dirty.
ALTER FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer) RENAME TO refresh_begin_v19;
CREATE FUNCTION pgsketch.refresh_begin(r text, full_rebuild boolean DEFAULT false,
                                       from_time text DEFAULT NULL, to_time text DEFAULT NULL,
                                       parts integer DEFAULT 1)
    RETURNS TABLE (lo timestamptz, hi timestamptz, read_sql text[], ndims integer, fields text[], write_sql text,
                   ranged boolean, bucket_zone text, time_kind text, grain text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
    d pgsketch.rollup_defs;
    why text;
    old bigint;
BEGIN
    -- Only a rollup with a log takes the lock here, before version 19's
    -- (which takes its snapshot of the inserted rows before it waits for
    -- the lock: a rollup on a distributed source has none).
    IF tbl IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        SELECT * INTO d FROM pgsketch.rollup_defs x WHERE x.name = r;
        why := pgsketch.shard_faults(r);
        IF why IS NOT NULL THEN
            INSERT INTO pgsketch.rollup_faults (rollup, relid, message)
            SELECT r, to_regclass(format('%I.%I', d.source_schema, d.source_table)), why
             WHERE NOT EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = r);
        END IF;
        DELETE FROM pgsketch.rollup_truncated t WHERE t.rollup = r;
        -- refresh_finish makes version + 1.
        EXECUTE format('WITH drained AS (UPDATE %s x SET consumed = $2 WHERE x.consumed IS NULL RETURNING x.bucket)
                        INSERT INTO pgsketch.rollup_dirty (rollup, bucket) SELECT DISTINCT $1, m.bucket FROM drained m', tbl)
          USING r, d.version + 1;
        INSERT INTO pgsketch.shard_drains (rollup, version, seen_at) VALUES (r, d.version, now()) ON CONFLICT DO NOTHING;
        old := (SELECT max(x.version) FROM pgsketch.shard_drains x WHERE x.rollup = r AND x.seen_at < now() - pgsketch.shard_log_keep());
        IF old IS NOT NULL THEN
            EXECUTE format('DELETE FROM %s x WHERE x.consumed <= $1', tbl) USING old;
            DELETE FROM pgsketch.shard_drains x WHERE x.rollup = r AND x.version < old;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM pgsketch.refresh_begin_v19(r, full_rebuild, from_time, to_time, parts);
END $$;

-- capture_remove (version 20): version 18's, then the log on a
-- distributed source and the rollup's TRUNCATE notes go too.
ALTER FUNCTION pgsketch.capture_remove(text) RENAME TO capture_remove_v18;
CREATE FUNCTION pgsketch.capture_remove(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
BEGIN
    PERFORM pgsketch.capture_remove_v18(r);
    PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
    EXECUTE format('DROP TABLE IF EXISTS pgsketch.%I', pgsketch.shard_log(r));
    DELETE FROM pgsketch.rollup_truncated t WHERE t.rollup = r;
    DELETE FROM pgsketch.shard_drains x WHERE x.rollup = r;
END $$;

-- rollup_schemas_usable says whether the calling role may use the schemas
-- of rollup d's source, table and level tables (a schema that no longer
-- exists counts as usable: the catalog says the table is gone).
CREATE FUNCTION pgsketch.rollup_schemas_usable(d pgsketch.rollup_defs) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN NOT EXISTS (SELECT FROM pg_namespace n
                        WHERE n.nspname IN (SELECT d.source_schema UNION ALL SELECT d.rollup_schema
                                            UNION ALL SELECT l.table_schema FROM pgsketch.rollup_levels l WHERE l.rollup = d.name)
                          AND NOT has_schema_privilege(n.oid, 'USAGE'));

-- catalog_v2 (version 20): version 1's catalog of rollups, which every
-- later version extends, now only of the rollups whose schemas the calling
-- role may use (rollup_schemas_usable). Before, one rollup in a schema the
-- role may not use failed the whole catalog for it (permission denied for
-- schema), and pgsketch-proxy answered every statement of that role
-- exactly; a role that may not use a rollup's schemas cannot read its
-- source either. Replaced in place: every later version calls it.
CREATE OR REPLACE FUNCTION pgsketch.catalog_v2() RETURNS json
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
    FROM pgsketch.rollup_defs d WHERE pgsketch.rollup_schemas_usable(d));

-- catalog (version 20): version 18's, and per rollup the name of its log
-- on a distributed source in schema pgsketch (shard_log), or null.
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v18;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    SET jit = off
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object(
               'shard_log',
               CASE WHEN to_regclass(format('pgsketch.%I', pgsketch.shard_log(c.r->>'name'))) IS NOT NULL
                    THEN pgsketch.shard_log(c.r->>'name') END))::json
               ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v18()) WITH ORDINALITY AS c(r, o));
