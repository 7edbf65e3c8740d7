-- pgsketch catalog objects, version 22: change capture on a distributed
-- source that no missing or altered log, no session setting and no shard
-- operation can make fail a write or miss one.
--
-- * The capture function on the shards looks the log up first and lets a
--   statement through unlogged when it is gone or not distributed; the
--   coordinator sees it in every answering statement (shard_log_broken,
--   through capture_broken) and answers exactly. It logs every statement,
--   and skips replica-role writes only in a logical replication worker
--   (capture_body_shards).
-- * The next refresh, which makes the log again (shard_log_define), records
--   a fault when the rollup had been refreshed with capture before, so that
--   it rebuilds every bucket; and it drops the capture triggers for
--   capture_prepare to create again: dropping a trigger on a distributed
--   table waits on every shard for the writes in flight, some of which may
--   have gone through unlogged, so that the rebuild's reads see them.
-- * The log has replica identity FULL, so that Citus can move its source's
--   shards by logical replication (shard_log_identity).
-- * A refresh of a source no longer distributed drops its log
--   (capture_prepare), which would otherwise pass for intact were the
--   table distributed again.
-- * A refresh of a rollup on a distributed source turns Citus's local
--   execution off for its transaction (refresh_begin), so that a rollup
--   with a min or max measure, or on a source with shards on the
--   coordinator, can be refreshed.

-- capture_body_shards (version 22): version 20's, changed in three places.
-- * It first returns unlogged when the rollup's log does not exist or is
--   not distributed (a DBA's DROP TABLE, a table of that name made again
--   by hand, as a restore of the coordinator would, or
--   undistribute_table): the lookup of the log's shard failed every write
--   with 'relation is not distributed'.
-- * Only a logical replication worker's writes under
--   session_replication_role = replica go unlogged: the rows a shard move
--   replays on the new placement, logged where they were written. Any
--   other session under replica (a superuser's, or one Citus sends a SET
--   LOCAL of it to) writes rows of its own, which were missed until a full
--   refresh.
-- * Every statement logs its buckets. The setting that remembered the
--   distribution value and bucket a transaction had logged is a pgsketch.*
--   setting, which any session can set: set by hand, it skipped writes'
--   log rows.
ALTER FUNCTION pgsketch.capture_body_shards(pgsketch.rollup_defs, text, text) RENAME TO capture_body_shards_v20;
CREATE FUNCTION pgsketch.capture_body_shards(d pgsketch.rollup_defs, ttype text, col text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body text := pgsketch.capture_body_shards_v20(d, ttype, col);
    lookup text := E'    -- The log''s shard for k, here and nowhere else.\n';
    replica text := E'    IF current_setting(''session_replication_role'') = ''replica'' THEN\n';
    one text := E'    IF cardinality(buckets) = 1 THEN\n';
    many text := E'    ELSIF buckets IS NOT NULL THEN\n';
BEGIN
    IF strpos(body, lookup) = 0 OR strpos(body, replica) = 0 OR strpos(body, one) = 0 OR strpos(body, many) < strpos(body, one) THEN
        RAISE EXCEPTION 'pgsketch: the capture function of rollup % is not in the form version 22 changes', d.name;
    END IF;
    body := replace(body, lookup, format(E'    -- The log dropped, or made again by hand and not distributed: the\n'
                                         || E'    -- coordinator sees it missing or not distributed with the table.\n'
                                         || E'    IF NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = to_regclass(%L)) THEN\n'
                                         || E'        RETURN NULL;\n'
                                         || E'    END IF;\n',
                                         format('pgsketch.%I', pgsketch.shard_log(d.name))) || lookup);
    body := replace(body, replica,
        E'    IF current_setting(''session_replication_role'') = ''replica''\n'
        || E'       AND (SELECT a.backend_type FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()) = ''logical replication worker'' THEN\n');
    RETURN left(body, strpos(body, one) - 1)
        || E'    -- Every statement logs its buckets: a setting remembering those\n'
        || E'    -- logged would be one any session can set.\n'
        || E'    IF buckets IS NOT NULL THEN\n'
        || substr(body, strpos(body, many) + length(many));
END $$;

-- shard_log_identity gives rollup r's log, where it has one, the replica
-- identity FULL. Citus moves a shard by logical replication (its
-- non-blocking moves, and the default shard_transfer_mode auto) only where
-- every co-located table has a replica identity: with the log, which has
-- no key, every such move of the source's shards failed (0A000, "cannot
-- use logical replication to transfer shards of the relation log_...").
-- The log's rows are small and few; FULL costs its updates and deletes
-- (a refresh's) the whole old row in the WAL.
CREATE FUNCTION pgsketch.shard_log_identity(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
BEGIN
    IF tbl IS NOT NULL AND (SELECT c.relreplident FROM pg_class c WHERE c.oid = tbl) <> 'f' THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', tbl);
    END IF;
END $$;

-- shard_log_define (version 22): where the log of a rollup refreshed with
-- capture before is missing, a fault (the next refresh rebuilds every
-- bucket) and the capture triggers dropped (capture_prepare creates them
-- again, after the writes in flight); then version 20's; then the log's
-- replica identity FULL (shard_log_identity).
ALTER FUNCTION pgsketch.shard_log_define(text, regclass) RENAME TO shard_log_define_v20;
CREATE FUNCTION pgsketch.shard_log_define(r text, src regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    tag text;
BEGIN
    IF to_regclass(format('pgsketch.%I', pgsketch.shard_log(r))) IS NULL
       AND EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r) THEN
        INSERT INTO pgsketch.rollup_faults (rollup, relid, message)
        SELECT r, src, format('its change log pgsketch.%I was missing (dropped, or %s distributed since)', pgsketch.shard_log(r), src)
         WHERE NOT EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = r);
        FOREACH tag IN ARRAY ARRAY['ins', 'upd', 'del', 'trunc'] LOOP
            EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', pgsketch.capture_trigger(r, tag), src);
        END LOOP;
    END IF;
    PERFORM pgsketch.shard_log_define_v20(r, src);
    PERFORM pgsketch.shard_log_identity(r);
END $$;

-- shard_log_broken (version 22): version 20's, saying that a missing log
-- may have been dropped.
ALTER FUNCTION pgsketch.shard_log_broken(text, regclass) RENAME TO shard_log_broken_v20;
CREATE FUNCTION pgsketch.shard_log_broken(r text, src regclass) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pgsketch.hash_distribution(src) IS NOT NULL AND to_regclass(format('pgsketch.%I', pgsketch.shard_log(r))) IS NULL THEN
        RETURN format('its change log pgsketch.%I is missing: %s was distributed by Citus since its last refresh, or the log was dropped',
                      pgsketch.shard_log(r), src);
    END IF;
    RETURN pgsketch.shard_log_broken_v20(r, src);
END $$;

-- refresh_begin (version 22): on a distributed source, Citus's local
-- execution off for the refresh's transaction, then version 20's. Its
-- DELETE from the reference table pgsketch.rollup_truncated ran on the
-- coordinator's own placement, after which Citus refused the read of a
-- rollup with a min or max measure, whose aggregated arm it runs over
-- connections, and any read of a source with shards on the coordinator
-- ("cannot switch local execution status from local execution required to
-- local execution disabled", XX000); the DELETE now goes over a connection
-- to the coordinator too.
ALTER FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer) RENAME TO refresh_begin_v20;
CREATE FUNCTION pgsketch.refresh_begin(r text, full_rebuild boolean DEFAULT false,
                                       from_time text DEFAULT NULL, to_time text DEFAULT NULL,
                                       parts integer DEFAULT 1)
    RETURNS TABLE (lo timestamptz, hi timestamptz, read_sql text[], ndims integer, fields text[], write_sql text,
                   ranged boolean, bucket_zone text, time_kind text, grain text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF to_regclass(format('pgsketch.%I', pgsketch.shard_log(r))) IS NOT NULL THEN
        PERFORM set_config('citus.enable_local_execution', 'off', true);
    END IF;
    RETURN QUERY SELECT * FROM pgsketch.refresh_begin_v20(r, full_rebuild, from_time, to_time, parts);
END $$;

-- capture_rewrite_shards writes the capture function of rollup r on a
-- source Citus distributes by hash again from the current capture_body
-- (Citus writes it on every node), as capture_rewrite does on one node:
-- where the old function matched the definition the last refresh recorded,
-- the record follows the new one. One whose function cannot be written
-- keeps it until its next refresh, said in a warning.
CREATE FUNCTION pgsketch.capture_rewrite_shards(r text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    same oid[];
BEGIN
    IF to_regprocedure(pgsketch.capture_function(r) || '()') IS NULL
       OR pgsketch.hash_distribution((SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table))
                                        FROM pgsketch.rollup_defs d WHERE d.name = r)) IS NULL THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
    -- Over one connection per node, as Citus requires of a function it
    -- writes on every node after other such writes in one transaction.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
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
        RAISE WARNING 'pgsketch: the capture function of rollup % keeps its old form until its next refresh: %', r, SQLERRM;
    END;
END $$;

-- Every rollup's log gets its replica identity.
SELECT pgsketch.shard_log_identity(name) FROM pgsketch.rollup_defs ORDER BY name;

-- Every capture function on a distributed source is written in the new form.
SELECT pgsketch.capture_rewrite_shards(name) FROM pgsketch.rollup_defs ORDER BY name;

-- capture_prepare (version 22): where the rollup's source is no longer
-- distributed (undistribute_table), its log goes, before version 20's.
-- Left in place, it passed for intact when the table was distributed
-- again into the log's co-location group, while the capture function was
-- still the one-node form, which logs nothing on shards: answers from the
-- rollup missed every write. Without a log the rollup is answered exactly
-- until a refresh captures the distributed table and rebuilds it
-- (shard_log_define). The refresh that drops the log rebuilds every bucket
-- anyway: undistribute_table makes a new table.
ALTER FUNCTION pgsketch.capture_prepare(text) RENAME TO capture_prepare_v20;
CREATE FUNCTION pgsketch.capture_prepare(r text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
    src regclass;
BEGIN
    IF tbl IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        src := (SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table)) FROM pgsketch.rollup_defs d WHERE d.name = r);
        IF src IS NULL OR pgsketch.hash_distribution(src) IS NULL THEN
            INSERT INTO pgsketch.rollup_faults (rollup, relid, message)
            SELECT r, src, format('its source %s is no longer distributed by Citus, and its change log pgsketch.%I was dropped',
                                  src, pgsketch.shard_log(r))
             WHERE src IS NOT NULL AND NOT EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = r);
            -- Over one connection per node: the capture function is
            -- written after it in this transaction.
            PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
            EXECUTE format('DROP TABLE %s', tbl);
            DELETE FROM pgsketch.shard_drains x WHERE x.rollup = r;
        END IF;
    END IF;
    RETURN pgsketch.capture_prepare_v20(r);
END $$;
