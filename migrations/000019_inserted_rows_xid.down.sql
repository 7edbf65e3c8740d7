-- Removes version 19: the tables of inserted rows are indexed by bucket
-- alone again, and inserts_define, refresh_begin and capture_body go back
-- to their version 18 forms; each rollup's capture function is written again from
-- version 18's capture_body, its record of the source following it where
-- it matched.

DO $do$
DECLARE
    r text;
    tbl regclass;
    old regclass;
BEGIN
    FOR r IN SELECT name FROM pgsketch.rollup_defs ORDER BY name LOOP
        tbl := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
        CONTINUE WHEN tbl IS NULL;
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(r));
        FOR old IN SELECT i.indexrelid::regclass FROM pg_index i WHERE i.indrelid = tbl LOOP
            EXECUTE format('DROP INDEX %s', old);
        END LOOP;
        EXECUTE format('CREATE INDEX ON %s (pgsketch_bucket)', tbl);
    END LOOP;
END $do$;

DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v18(text, boolean, text, text, integer) RENAME TO refresh_begin;
DROP FUNCTION pgsketch.inserts_define(text);
ALTER FUNCTION pgsketch.inserts_define_v18(text) RENAME TO inserts_define;
DROP FUNCTION pgsketch.inserts_index(regclass);

DROP FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text);
ALTER FUNCTION pgsketch.capture_body_v18(pgsketch.rollup_defs, text) RENAME TO capture_body;

SELECT pgsketch.capture_rewrite(name, '19') FROM pgsketch.rollup_defs ORDER BY name;
DROP FUNCTION pgsketch.capture_rewrite(text, text);
