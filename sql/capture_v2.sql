-- pgsketch catalog objects, version 10: the change-capture check every
-- answered query runs (pgsketch.capture_check, through capture_broken)
-- reads the source's partitions once, in a query of its own that
-- PL/pgSQL plans once per session, instead of twice through
-- capture_rels, a function PostgreSQL cannot inline (its SET clause)
-- and so planned anew at every call: the check took 1.5 ms of every
-- answer; the same verdicts, in the same order.

-- capture_broken says why rollup r's rows may not reflect its source, or
-- NULL when they do (but for the buckets in the log): the source is not
-- the relation the last refresh read, its set of partitions changed, or a
-- capture trigger is missing or not enabled ALWAYS.
CREATE OR REPLACE FUNCTION pgsketch.capture_broken(r text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d pgsketch.rollup_defs;
    src regclass;
    rels oid[];
    rel oid;
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
    IF NOT EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r) THEN
        RETURN 'it has not been refreshed with change capture yet';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r AND c.relid = src) THEN
        RETURN format('%s is not the table it was refreshed from (dropped and re-created, or swapped by RENAME)', src);
    END IF;
    -- The source and every relation under it (pgsketch.capture_rels).
    rels := ARRAY(WITH RECURSIVE t(relid) AS (
                      SELECT src::oid
                      UNION
                      SELECT i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.relid)
                  SELECT relid FROM t);
    FOREACH rel IN ARRAY rels LOOP
        IF NOT EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r AND c.relid = rel) THEN
            RETURN format('%s was attached to or created in %s since its last refresh', rel::regclass, src);
        END IF;
        IF (SELECT count(*) FROM pg_trigger t
             WHERE t.tgrelid = rel AND t.tgenabled = 'A'
               AND t.tgname IN (pgsketch.capture_trigger(r, 'ins'), pgsketch.capture_trigger(r, 'upd'),
                                pgsketch.capture_trigger(r, 'del'), pgsketch.capture_trigger(r, 'trunc'))) <> 4 THEN
            RETURN format('its change capture triggers on %s are disabled or missing', rel::regclass);
        END IF;
    END LOOP;
    IF EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r AND c.relid <> ALL (rels)) THEN
        RETURN format('a partition or child of %s was detached or dropped since its last refresh', src);
    END IF;
    RETURN NULL;
END $$;
