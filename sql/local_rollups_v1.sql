-- pgsketch catalog objects, version 13: on Citus, rollup and level tables
-- stay local on the coordinator, and one distributed anyway is neither
-- refreshed nor answered from.
--
-- * Every rollup and level table carries the row-level security policy
--   pgsketch_source_readers (sql/trust_v1.sql), whose condition asks
--   pgsketch.require_source_read once per statement, in a subquery.
--   Citus refuses a policy with a subquery on a distributed table, so
--   create_distributed_table of a rollup table fails (SQLSTATE 0A000,
--   "cannot create policy", DETAIL "Subqueries are not supported in
--   policies on distributed tables") and the table stays local. No form
--   Citus accepts keeps the policy's guarantee: Citus evaluates a
--   distributed table's policy on the workers, row by row, where neither
--   pgsketch's catalog nor (for a source local on the coordinator) the
--   source and its privileges exist; so a role would read the shards
--   either unchecked or not at all.
-- * A rollup or level table distributed anyway (its policy dropped by
--   hand, or distributed before catalog version 11 gave it one) is not
--   refreshed: refresh_begin refuses it with SQLSTATE 0A000, before any
--   work (the refresh's end would otherwise fail re-creating the policy);
--   and not answered from: capture_broken names it, so the proxy answers
--   exactly. Nothing of its consistency under Citus's commits, shard by
--   shard, has been shown (docs/citus.md §4). rollup drop drops it.

-- distributed_first is the first of source src (NULL: none) and rollup
-- r's table and level tables that Citus distributes (that is in its
-- metadata: distributed, reference or added to it), or NULL. Without
-- Citus it returns at once: every answering statement asks it.
CREATE FUNCTION pgsketch.distributed_first(r text, src regclass) RETURNS regclass
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t regclass;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT u.rel FROM unnest($1) WITH ORDINALITY AS u(rel, i)
              WHERE EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid::oid = u.rel)
              ORDER BY u.i LIMIT 1'
       INTO t
      USING src::oid || ARRAY(SELECT to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))::oid
                                FROM pgsketch.rollup_defs d WHERE d.name = r
                              UNION ALL
                              SELECT to_regclass(format('%I.%I', l.table_schema, l.table_name))::oid
                                FROM pgsketch.rollup_levels l WHERE l.rollup = r);
    RETURN t;
END $$;

-- refresh_begin (version 13): refuses a rollup whose table or a level
-- table Citus distributes, with SQLSTATE 0A000; then version 11's.
ALTER FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer) RENAME TO refresh_begin_v11;
CREATE FUNCTION pgsketch.refresh_begin(r text, full_rebuild boolean DEFAULT false,
                                       from_time text DEFAULT NULL, to_time text DEFAULT NULL,
                                       parts integer DEFAULT 1)
    RETURNS TABLE (lo timestamptz, hi timestamptz, read_sql text[], ndims integer, fields text[], write_sql text,
                   ranged boolean, bucket_zone text, time_kind text, grain text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    dist regclass := pgsketch.distributed_first(r, NULL);
BEGIN
    PERFORM pgsketch.raise_unless(dist IS NULL, '0A000',
        format('table %s of rollup %s is distributed by Citus: pgsketch keeps rollup tables local on the coordinator', dist, r),
        format('Make it local again (SELECT undistribute_table(%L)) and refresh the rollup, which puts back its row-level security policy; or drop the rollup.',
               dist::text));
    RETURN QUERY SELECT * FROM pgsketch.refresh_begin_v11(r, full_rebuild, from_time, to_time, parts);
END $$;

-- capture_broken (version 13): version 11's verdicts, and a rollup whose
-- table or a level table Citus distributes. The source and the rollup's
-- tables are looked up in Citus's catalog together: an answering
-- statement on Citus pays one dynamic query, as before.
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
        RETURN format('its source %s is distributed by Citus, whose changes pgsketch cannot capture yet', src);
    ELSIF dist IS NOT NULL THEN
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
