-- pgsketch catalog objects, version 22 (with sql/shard_log_v2.sql): the
-- setting in which a transaction remembers the bucket it logged
-- (capture_logged_setting) no longer decides alone that a statement is not
-- logged. Any session can set a pgsketch.* setting: set by hand to a
-- bucket before a write, it made the capture function skip the write's
-- log row, and the rollup missed the write until a full refresh.
--
-- * On one node the setting stays a hint: it skips the insert only where
--   the log holds a row of this transaction for the bucket (an index probe
--   of rollup_dirty).
-- * On a distributed source's shards, where the setting held the
--   distribution value beside the bucket and so rarely matched, every
--   statement logs its buckets.
-- * On shards, a write under session_replication_role = replica goes
--   unlogged only from a logical replication worker (a shard move's
--   replay), no longer from any session.

-- capture_body (version 22): version 20's, with the setting checked
-- against the log on one node.
ALTER FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text) RENAME TO capture_body_v20;
CREATE FUNCTION pgsketch.capture_body(d pgsketch.rollup_defs, ttype text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body text := pgsketch.capture_body_v20(d, ttype);
    memo text := format('        IF current_setting(%L, true) IS DISTINCT FROM extract(epoch FROM buckets[1])::text THEN',
                        pgsketch.capture_logged_setting(d.name)) || E'\n';
BEGIN
    IF pgsketch.hash_distribution(to_regclass(format('%I.%I', d.source_schema, d.source_table))) IS NOT NULL THEN
        RETURN body; -- the form for a distributed source's shards (capture_body_shards)
    END IF;
    IF strpos(body, memo) = 0 THEN
        RAISE EXCEPTION 'pgsketch: the capture function of rollup % has no check of its setting to extend', d.name;
    END IF;
    RETURN replace(body, memo,
        E'        -- The setting is a hint, which any session can set: a row of\n'
        || E'        -- this transaction in the log is what skips the insert.\n'
        || left(memo, length(memo) - length(E' THEN\n')) || E'\n'
        || format(E'           OR NOT EXISTS (SELECT FROM pgsketch.rollup_dirty x WHERE x.rollup = %L AND x.bucket = buckets[1]\n', d.name)
        || E'                                                        AND x.xmin = pg_current_xact_id()::xid) THEN\n');
END $$;

-- capture_body_shards (version 22, again): every statement logs its
-- buckets; and only a logical replication worker's writes under
-- session_replication_role = replica go unlogged. Those are the rows a
-- shard move replays on the new placement, logged where they were written;
-- any other session under replica (a superuser's, or one Citus sends a
-- SET LOCAL of it to) writes rows of its own, which were missed until a
-- full refresh.
ALTER FUNCTION pgsketch.capture_body_shards(pgsketch.rollup_defs, text, text) RENAME TO capture_body_shards_v22a;
CREATE FUNCTION pgsketch.capture_body_shards(d pgsketch.rollup_defs, ttype text, col text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body text := pgsketch.capture_body_shards_v22a(d, ttype, col);
    first int := strpos(body, E'    IF cardinality(buckets) = 1 THEN\n');
    last int := strpos(body, E'    ELSIF buckets IS NOT NULL THEN\n');
    replica text := E'    IF current_setting(''session_replication_role'') = ''replica'' THEN\n';
BEGIN
    IF first = 0 OR last < first OR strpos(body, replica) = 0 THEN
        RAISE EXCEPTION 'pgsketch: the capture function of rollup % has no one-bucket branch or replica check to replace', d.name;
    END IF;
    body := replace(body, replica,
        E'    IF current_setting(''session_replication_role'') = ''replica''\n'
        || E'       AND (SELECT a.backend_type FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()) = ''logical replication worker'' THEN\n');
    first := strpos(body, E'    IF cardinality(buckets) = 1 THEN\n');
    last := strpos(body, E'    ELSIF buckets IS NOT NULL THEN\n');
    RETURN left(body, first - 1)
        || E'    -- Every statement logs its buckets: a setting remembering those\n'
        || E'    -- logged would be one any session can set.\n'
        || E'    IF buckets IS NOT NULL THEN\n'
        || substr(body, last + length(E'    ELSIF buckets IS NOT NULL THEN\n'));
END $$;

-- Every capture function is written in the new form.
SELECT pgsketch.capture_rewrite(name, '21') FROM pgsketch.rollup_defs ORDER BY name;
SELECT pgsketch.capture_rewrite_shards(name) FROM pgsketch.rollup_defs ORDER BY name;
