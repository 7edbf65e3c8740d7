-- Removes version 20: the logs of rollups on distributed sources go, and
-- capture_body, capture_prepare, capture_check_inserts, refresh_begin,
-- capture_remove and catalog go back to their earlier forms; capture_broken
-- and sync_grants are replaced in place (views call the first) by their
-- version 13 and 11 forms, which refuse a distributed source again.

-- catalog_v2 (version 1's catalog), of every rollup again.
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
    FROM pgsketch.rollup_defs d);
DROP FUNCTION pgsketch.rollup_schemas_usable(pgsketch.rollup_defs);

DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v18() RENAME TO catalog;
DROP FUNCTION pgsketch.capture_remove(text);
ALTER FUNCTION pgsketch.capture_remove_v18(text) RENAME TO capture_remove;
DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v19(text, boolean, text, text, integer) RENAME TO refresh_begin;
DROP FUNCTION pgsketch.capture_check_inserts(text, timestamptz, timestamptz);
ALTER FUNCTION pgsketch.capture_check_inserts_v18(text, timestamptz, timestamptz) RENAME TO capture_check_inserts;
COMMENT ON FUNCTION pgsketch.capture_check_inserts(text, timestamptz, timestamptz) IS
    'the number of logged buckets in [lo, hi) of rollup r, failing (42501, 55000) where the role may not read its source or its change capture is not in place';
DROP FUNCTION pgsketch.capture_prepare(text);
ALTER FUNCTION pgsketch.capture_prepare_v18(text) RENAME TO capture_prepare;
DROP FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text);
ALTER FUNCTION pgsketch.capture_body_v19(pgsketch.rollup_defs, text) RENAME TO capture_body;

-- Each rollup with a log gets its capture function in version 19's form,
-- whose copies on the shards log nothing and never fail a write (the
-- rollup is then answered exactly, its source being distributed), and the
-- log goes. Citus creates
-- the function on every node over one connection per node, after the
-- drop of a distributed table only in sequential mode.
DO $do$
DECLARE
    r text;
BEGIN
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        CONTINUE WHEN to_regclass(format('pgsketch.%I', pgsketch.shard_log(r))) IS NULL;
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        IF to_regprocedure(pgsketch.capture_function(r) || '()') IS NOT NULL THEN
            BEGIN
                PERFORM pgsketch.capture_define(r);
            EXCEPTION WHEN OTHERS THEN
                -- No function can be written (the source or its time
                -- column is gone): the triggers go with this one, and the
                -- rollup is not answered from until a refresh.
                EXECUTE format('DROP FUNCTION %s() CASCADE', pgsketch.capture_function(r));
            END;
        END IF;
        EXECUTE format('DROP TABLE pgsketch.%I', pgsketch.shard_log(r));
    END LOOP;
END $do$;

-- capture_broken (version 13).
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

-- sync_grants (version 11).
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

DROP FUNCTION pgsketch.capture_body_shards(pgsketch.rollup_defs, text, text);
DROP FUNCTION pgsketch.shard_log_define(text, regclass);
DROP FUNCTION pgsketch.shard_faults(text);
DROP FUNCTION pgsketch.shard_logged(text);
DROP FUNCTION pgsketch.shard_log_broken(text, regclass);
DROP FUNCTION pgsketch.hash_distribution(oid);
DROP TABLE pgsketch.rollup_truncated;
DROP TABLE pgsketch.shard_drains;
DROP FUNCTION pgsketch.shard_log_keep();
DROP FUNCTION pgsketch.shard_log(text);
