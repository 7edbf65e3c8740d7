-- pgsketch catalog objects, version 26: the checks an answer over a rollup
-- of a distributed source makes on the coordinator read Citus's metadata
-- with statements PL/pgSQL plans once per session, not with EXECUTE, which
-- parsed and planned each of them on every call: seven such statements
-- per answer (hash_distribution twice, distributed_first twice, the log's
-- co-location once), 0.83 ms of pgsketch.capture_broken back to back on
-- the benchmark cluster. The verdicts and their messages are version 25's.
-- The statements name pg_dist_partition and Citus's functions, so each
-- runs only once the function has seen that Citus's catalog exists (each
-- in a statement of its own: PL/pgSQL plans a condition's whole
-- expression), and column_to_column_name only for a table distributed by
-- hash: a database without Citus still creates and calls these functions.

-- hash_distribution (version 26): version 20's, planned once. Citus's
-- column_to_column_name is named only in the statement that runs for a
-- table distributed by hash, as before: a statement naming it is planned
-- where it exists.
ALTER FUNCTION pgsketch.hash_distribution(oid) RENAME TO hash_distribution_v20;
CREATE FUNCTION pgsketch.hash_distribution(rel oid) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                    WHERE p.logicalrelid = rel::regclass AND p.partmethod = 'h' AND p.repmodel = 's') THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT column_to_column_name(p.logicalrelid, p.partkey) FROM pg_catalog.pg_dist_partition p
             WHERE p.logicalrelid = rel::regclass);
END $$;

-- distributed_first (version 26): version 13's, planned once.
ALTER FUNCTION pgsketch.distributed_first(text, regclass) RENAME TO distributed_first_v13;
CREATE FUNCTION pgsketch.distributed_first(r text, src regclass) RETURNS regclass
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT u.rel::regclass
              FROM unnest(src::oid || ARRAY(SELECT to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))::oid
                                              FROM pgsketch.rollup_defs d WHERE d.name = r
                                            UNION ALL
                                            SELECT to_regclass(format('%I.%I', l.table_schema, l.table_name))::oid
                                              FROM pgsketch.rollup_levels l WHERE l.rollup = r))
                   WITH ORDINALITY AS u(rel, i)
             WHERE EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid::oid = u.rel)
             ORDER BY u.i LIMIT 1);
END $$;

-- shard_log_broken (version 26): version 22's with version 20's in one
-- body, the distribution looked up once: a source not distributed by hash,
-- then a log missing, then a log not distributed with the source.
ALTER FUNCTION pgsketch.shard_log_broken(text, regclass) RENAME TO shard_log_broken_v22;
CREATE FUNCTION pgsketch.shard_log_broken(r text, src regclass) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := to_regclass(format('pgsketch.%I', pgsketch.shard_log(r)));
BEGIN
    IF pgsketch.hash_distribution(src) IS NULL THEN
        RETURN format('its source %s is distributed by Citus other than by hash with one placement per shard (a reference table, replicated shards, or added to Citus''s metadata), whose changes pgsketch cannot capture', src);
    END IF;
    IF tbl IS NULL THEN
        RETURN format('its change log pgsketch.%I is missing: %s was distributed by Citus since its last refresh, or the log was dropped',
                      pgsketch.shard_log(r), src);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition l JOIN pg_catalog.pg_dist_partition s ON s.colocationid = l.colocationid
                    WHERE l.logicalrelid = tbl AND s.logicalrelid = src AND l.partmethod = 'h') THEN
        RETURN format('its change log %s is not distributed with its source %s', tbl, src);
    END IF;
    RETURN NULL;
END $$;
