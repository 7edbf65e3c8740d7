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
--   statement logs its buckets (capture_body_shards, in
--   sql/shard_log_v2.sql).

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

-- Every capture function on one node is written in the new form (those
-- on distributed sources were, in sql/shard_log_v2.sql).
SELECT pgsketch.capture_rewrite(name, '21') FROM pgsketch.rollup_defs ORDER BY name;
