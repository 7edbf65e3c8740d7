-- pgsketch catalog objects, version 12: change capture on a table that
-- Citus distributes never fails a write, and dropping its rollup needs no
-- setting.
--
-- * Citus copies a table's triggers onto its shards when it distributes
--   the table (create_distributed_table with citus.enable_unsafe_triggers
--   on, which it allows for an empty table, or for one whose rows the
--   triggers let through), and creates every function of schema pgsketch
--   on the workers too. There the capture function found no change log
--   (pgsketch's catalog lives on the coordinator only) and every INSERT,
--   UPDATE, DELETE, COPY and TRUNCATE of the table failed. It now returns
--   at once where the catalog does not exist: nothing is logged on a
--   worker, and the coordinator never answers from such a rollup
--   (capture_broken: its source is distributed by Citus), nor refreshes it
--   (capture_prepare refuses it with SQLSTATE 0A000).
-- * capture_remove drops the trigger function with CASCADE when a capture
--   trigger sits on a table Citus distributes: DROP TRIGGER on such a
--   table needs citus.enable_unsafe_triggers, and Citus 13.2 never sends
--   the DROP of a TRUNCATE trigger to the shards, whose copies would keep
--   the function from being dropped on the workers. Citus sends the DROP
--   FUNCTION ... CASCADE to every node, where it takes the shards' and the
--   shells' triggers with it.
-- * Every rollup's capture function is rewritten in the new form. A
--   captured relation whose definition the last refresh recorded, and
--   which is as recorded, has its record follow the function's new
--   catalog row: the rewrite is no change a write could slip through (the
--   old and the new function log the same buckets), so rollups keep being
--   answered and their next refresh is incremental.

-- capture_body (version 12): version 11's, returning at once without
-- pgsketch's catalog (no pgsketch.rollup_defs: a shard on a Citus worker).
ALTER FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text) RENAME TO capture_body_v11;
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
    -- No change log here: a copy of this trigger on a shard of a table
    -- Citus distributes, on a worker. Nothing to log, and nothing that
    -- may fail the write; the coordinator answers such a rollup exactly.
    IF to_regclass('pgsketch.rollup_defs') IS NULL THEN
        RETURN NULL;
    END IF;
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

-- capture_remove (version 12): when a capture trigger of rollup r sits on a
-- table Citus distributes, first drops the trigger function with CASCADE,
-- which Citus runs on every node (the triggers on the coordinator's table,
-- the workers' shells and the shards go with it); then version 11's. The
-- NOTICEs of the cascade are not shown.
ALTER FUNCTION pgsketch.capture_remove(text) RENAME TO capture_remove_v11;
CREATE FUNCTION pgsketch.capture_remove(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    fn regprocedure := to_regprocedure(pgsketch.capture_function(r) || '()');
BEGIN
    IF fn IS NOT NULL AND EXISTS (SELECT FROM pg_trigger tg WHERE tg.tgfoid = fn AND pgsketch.distributed(tg.tgrelid)) THEN
        PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
        EXECUTE format('DROP FUNCTION %s CASCADE', fn);
    END IF;
    PERFORM pgsketch.capture_remove_v11(r);
END $$;

-- Every rollup's capture function in its new form, one rollup at a time
-- under its lock (a refresh of it has committed first). Where the old
-- function matched the definition the last refresh recorded, the record
-- follows the new one. One the migrating role may not change keeps its
-- old form, with a WARNING, until its owner's next refresh; one no
-- function can be made for (its time column is gone) gets one that only
-- marks the rollup, as version 11 did, now harmless on a worker too.
DO $do$
DECLARE
    r text;
    same oid[];
    why text;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        CONTINUE WHEN to_regprocedure(pgsketch.capture_function(r) || '()') IS NULL;
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        same := ARRAY(SELECT c.relid FROM pgsketch.rollup_captured c
                       WHERE c.rollup = r
                         AND c.fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                                 ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns'))));
        BEGIN
            IF pgsketch.capture_define(r) THEN
                UPDATE pgsketch.rollup_captured c
                   SET fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                         ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns')))
                 WHERE c.rollup = r AND c.relid = ANY (same);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            why := SQLERRM;
            BEGIN
                EXECUTE format($f$CREATE OR REPLACE FUNCTION %1$s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = pg_catalog, pg_temp AS $body$
BEGIN
    IF to_regclass('pgsketch.rollup_defs') IS NULL THEN
        RETURN NULL;
    END IF;
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
    END LOOP;
END $do$;
