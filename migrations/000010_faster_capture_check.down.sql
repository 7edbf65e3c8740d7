-- Removes version 10: capture_broken goes back to its version 6 form,
-- which reads the source's partitions through pgsketch.capture_rels.

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
    FOR rel IN SELECT * FROM pgsketch.capture_rels(src) LOOP
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
    IF EXISTS (SELECT FROM pgsketch.rollup_captured c WHERE c.rollup = r
                AND c.relid NOT IN (SELECT * FROM pgsketch.capture_rels(src))) THEN
        RETURN format('a partition or child of %s was detached or dropped since its last refresh', src);
    END IF;
    RETURN NULL;
END $$;
