-- pgsketch catalog objects, version 25: the capture function on a
-- distributed source's shards finds the log's shard on its node as Citus's
-- metadata and the catalog are now, and writes its log rows into that
-- shard's table by name.
--
-- * It looked the log's placement up in pg_dist_placement, which a query
--   reads through the transaction's snapshot. A REPEATABLE READ transaction
--   whose snapshot predates a move (or split) of the shard group onto its
--   node, writing a row of that group after it, found the placement still
--   on the old node and let the write through unlogged: answers missed the
--   row, and nothing made the coordinator answer exactly. Citus routes the
--   write by its metadata cache, which is current; the function now asks
--   the same cache for the log's shard (get_shard_id_for_distribution_column)
--   and the catalog for that shard's table on this node (shard_name,
--   to_regclass), neither of which a snapshot holds back. Where there is
--   none here the log is not distributed with the table any more, which the
--   coordinator sees (shard_log_broken) and answers exactly, and the next
--   refresh rebuilds every bucket.
-- * The checks that still read catalog rows by a query take a relation
--   whose rows the snapshot lacks for one made after it, not for one
--   missing: the columns the function reads are checked on the distributed
--   table where the snapshot holds none of the shard's (a shard moved or
--   split here since), and a log whose pg_class row the snapshot lacks (the
--   log of a rollup made since) is not taken for one not distributed. A
--   snapshot older than an ALTER TABLE of a column the function reads and
--   the refresh after it is still checked against the old definition, and
--   a log made again by hand, not distributed, after the snapshot fails the
--   write (docs/red-team.md, "Known and left alone").
-- * Through the distributed log, Citus planned the log's INSERT ... SELECT
--   from unnest(buckets) as a distributed statement on every write, about
--   half of what the capture added to a one-row INSERT (docs/benchmarks.md,
--   "Citus at catalog version 25"). The rows go into the shard's table by
--   its name, which is what Citus's local execution ran.

-- capture_body_shards (version 25): version 22's, with the log's shard
-- found as it is now, and written by name.
ALTER FUNCTION pgsketch.capture_body_shards(pgsketch.rollup_defs, text, text) RENAME TO capture_body_shards_v22;
CREATE FUNCTION pgsketch.capture_body_shards(d pgsketch.rollup_defs, ttype text, col text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body text := pgsketch.capture_body_shards_v22(d, ttype, col);
    logname text := format('pgsketch.%I', pgsketch.shard_log(d.name));
    decl text := E'    here integer;\n';
    lookup text := format(E'    -- The log''s shard for k, here and nowhere else.\n'
                          || E'    SELECT groupid INTO here FROM pg_dist_local_group;\n'
                          || E'    logshard := get_shard_id_for_distribution_column(%L, k);\n'
                          || E'    IF NOT EXISTS (SELECT FROM pg_dist_placement p WHERE p.shardid = logshard AND p.groupid = here)\n'
                          || E'       OR EXISTS (SELECT FROM pg_dist_placement p WHERE p.shardid = logshard AND p.groupid <> here) THEN\n'
                          || E'        RETURN NULL;\n'
                          || E'    END IF;\n', logname);
    ins text := format(E'        INSERT INTO %s (key, bucket) SELECT k, b FROM unnest(buckets) AS b;\n', logname);
    cols text := E'    -- The columns read, as this function was written for them.\n'
                 || E'    IF (SELECT count(*) FROM pg_attribute a\n'
                 || E'         WHERE a.attrelid = TG_RELID AND a.attnum > 0 AND NOT a.attisdropped\n';
    src text := format('%I.%I', d.source_schema, d.source_table);
    guard text := format(E'    IF NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = to_regclass(%L)) THEN\n', logname);
BEGIN
    IF strpos(body, decl) = 0 OR strpos(body, lookup) = 0 OR strpos(body, ins) = 0 OR strpos(body, cols) = 0
       OR strpos(body, guard) = 0 THEN
        RAISE EXCEPTION 'pgsketch: the capture function of rollup % is not in the form version 25 changes', d.name;
    END IF;
    body := replace(body, decl, E'    logrel regclass;\n    checked oid;\n');
    -- Catalog rows read by a query are those of the transaction's
    -- snapshot; a relation made after it (a shard moved or split onto this
    -- node, the log of a rollup made since) has none there, and is checked
    -- as it is now or not at all.
    body := replace(body, cols,
        E'    -- The columns read, as this function was written for them: this\n'
        || E'    -- shard''s, or where the transaction''s snapshot holds none of its\n'
        || E'    -- rows (a shard moved or split here since), the distributed\n'
        || E'    -- table''s; neither, and the table itself is newer than the snapshot.\n'
        || E'    -- (pg_attribute, not pg_class: Citus hides shards from queries of\n'
        || E'    -- pg_class in a client''s session.)\n'
        || E'    checked := CASE WHEN EXISTS (SELECT FROM pg_attribute x WHERE x.attrelid = TG_RELID) THEN TG_RELID\n'
        || format(E'                    WHEN EXISTS (SELECT FROM pg_attribute x WHERE x.attrelid = to_regclass(%1$L)) THEN to_regclass(%1$L) END;\n', src)
        || E'    IF checked IS NOT NULL AND (SELECT count(*) FROM pg_attribute a\n'
        || E'         WHERE a.attrelid = checked AND a.attnum > 0 AND NOT a.attisdropped\n');
    body := replace(body, guard,
        format(E'    -- (A log made after this transaction''s snapshot is not in it: Citus''s\n'
               || E'    -- metadata, read below, is as it is now.)\n'
               || E'    IF to_regclass(%1$L) IS NULL\n'
               || E'       OR (NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = to_regclass(%1$L))\n'
               || E'           AND EXISTS (SELECT FROM pg_class c WHERE c.oid = to_regclass(%1$L))) THEN\n', logname));
    body := replace(body, lookup,
        E'    -- The log''s shard for k, and its table on this node, by Citus''s\n'
        || E'    -- metadata and the catalog as they are now: a transaction''s\n'
        || E'    -- snapshot may predate a move or split of the shard onto this node.\n'
        || E'    -- None here: the log is not distributed with the table any more,\n'
        || E'    -- which the coordinator sees.\n'
        || format(E'    logshard := get_shard_id_for_distribution_column(%L, k);\n', logname)
        || format(E'    logrel := to_regclass(shard_name(%L, logshard));\n', logname)
        || E'    IF logrel IS NULL THEN\n'
        || E'        RETURN NULL;\n'
        || E'    END IF;\n');
    RETURN replace(body, ins,
        E'        -- Into the log''s shard by its name: through the distributed log\n'
        || E'        -- Citus would plan a distributed INSERT ... SELECT for every write.\n'
        || E'        EXECUTE format(''INSERT INTO %s (key, bucket) SELECT $1, b FROM unnest($2) AS b'', logrel) USING k, buckets;\n');
END $$;

-- Every capture function on a distributed source is written in the new
-- form; where the old one matched the definition the last refresh
-- recorded, the record follows (capture_rewrite_shards), so answers go on
-- from the rollup without a rebuild.
SELECT pgsketch.capture_rewrite_shards(name) FROM pgsketch.rollup_defs ORDER BY name;
