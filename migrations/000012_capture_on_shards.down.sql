-- Removes version 12: capture_body and capture_remove go back to their
-- version 11 forms, kept under other names by the up migration, and every
-- rollup's capture function is written again from version 11's
-- capture_body, its record of the source following it where it matched
-- (as the up migration does). The functions of rollups whose source Citus
-- distributes keep their version 12 form: version 11's would make every
-- write to the table fail on the workers again, and version 11 never
-- rewrites them (it refuses to refresh such a rollup).

DROP FUNCTION pgsketch.capture_remove(text);
ALTER FUNCTION pgsketch.capture_remove_v11(text) RENAME TO capture_remove;
DROP FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text);
ALTER FUNCTION pgsketch.capture_body_v11(pgsketch.rollup_defs, text) RENAME TO capture_body;

DO $do$
DECLARE
    r text;
    src regclass;
    same oid[];
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        CONTINUE WHEN to_regprocedure(pgsketch.capture_function(r) || '()') IS NULL;
        SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table)) INTO src
          FROM pgsketch.rollup_defs d WHERE d.name = r;
        CONTINUE WHEN src IS NULL OR pgsketch.distributed(src);
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        same := ARRAY(SELECT c.relid FROM pgsketch.rollup_captured c
                       WHERE c.rollup = r
                         AND c.fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                                 ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns'))));
        BEGIN
            IF pgsketch.capture_define(r) THEN
                UPDATE pgsketch.rollup_captured c
                   SET fingerprint = pgsketch.capture_fingerprint(r, c.relid,
                                         ARRAY(SELECT jsonb_object_keys(c.fingerprint->'columns')))
                 WHERE c.rollup = r AND c.relid = ANY (same);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgsketch: the capture function of rollup % keeps its version 12 form until its next refresh: %', r, SQLERRM;
        END;
    END LOOP;
END $do$;
