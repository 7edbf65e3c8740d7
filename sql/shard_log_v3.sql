-- pgsketch catalog objects, version 25: the capture function on a
-- distributed source's shards writes its log rows into the log's shard on
-- its own node by the shard's name.
--
-- Through the distributed log, Citus plans the log's INSERT ... SELECT
-- from unnest(buckets) as a distributed statement on every write, which
-- cost a one-row INSERT about a third of what its capture added
-- (docs/benchmarks.md, "Citus at catalog version 25"). The function
-- already proves, before it writes, that the log's shard for the
-- statement's distribution value has exactly one placement and that it is
-- on this node; an INSERT into that shard's table, named as Citus names it
-- (shard_name), is what Citus's local execution would have run.
--
-- Nothing else changes: the rows, their shard, the transaction they are
-- written in and the checks before them are those of version 22.

-- capture_body_shards (version 25): version 22's, with the log's insert
-- into the local shard by name.
ALTER FUNCTION pgsketch.capture_body_shards(pgsketch.rollup_defs, text, text) RENAME TO capture_body_shards_v22;
CREATE FUNCTION pgsketch.capture_body_shards(d pgsketch.rollup_defs, ttype text, col text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body text := pgsketch.capture_body_shards_v22(d, ttype, col);
    logname text := format('pgsketch.%I', pgsketch.shard_log(d.name));
    ins text := format(E'        INSERT INTO %s (key, bucket) SELECT k, b FROM unnest(buckets) AS b;\n', logname);
BEGIN
    IF strpos(body, ins) = 0 OR strpos(body, E'    logshard := get_shard_id_for_distribution_column(') = 0 THEN
        RAISE EXCEPTION 'pgsketch: the capture function of rollup % is not in the form version 25 changes', d.name;
    END IF;
    RETURN replace(body, ins,
        E'        -- Into the log''s shard on this node (logshard, checked above),\n'
        || E'        -- by its name: through the distributed log Citus would plan a\n'
        || E'        -- distributed INSERT ... SELECT for every write.\n'
        || format(E'        EXECUTE format(''INSERT INTO %%s (key, bucket) SELECT $1, b FROM unnest($2) AS b'', shard_name(%L, logshard))\n', logname)
        || E'            USING k, buckets;\n');
END $$;

-- Every capture function on a distributed source is written in the new
-- form; where the old one matched the definition the last refresh
-- recorded, the record follows (capture_rewrite_shards), so answers go on
-- from the rollup without a rebuild.
SELECT pgsketch.capture_rewrite_shards(name) FROM pgsketch.rollup_defs ORDER BY name;
