-- Removes version 13: refresh_begin and capture_broken go back to their
-- version 11 forms (capture_broken is replaced in place: views call it).

DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v11(text, boolean, text, text, integer) RENAME TO refresh_begin;

-- capture_broken (version 11): version 10's verdicts, and a source
-- distributed by Citus, a write whose buckets the capture could not
-- compute, or a relation whose definition differs from the fingerprint
-- recorded at the last refresh.
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
    IF pgsketch.distributed(src) THEN
        RETURN format('its source %s is distributed by Citus, whose changes pgsketch cannot capture yet', src);
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

DROP FUNCTION pgsketch.distributed_first(text, regclass);
