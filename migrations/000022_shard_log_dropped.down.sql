-- Removes version 22: capture_body, capture_body_shards, shard_log_define,
-- shard_log_broken, capture_prepare and refresh_begin go back to version 20's, and the capture functions on
-- distributed sources are written in that form again.
DROP FUNCTION pgsketch.capture_body(pgsketch.rollup_defs, text);
ALTER FUNCTION pgsketch.capture_body_v20(pgsketch.rollup_defs, text) RENAME TO capture_body;
DROP FUNCTION pgsketch.capture_body_shards(pgsketch.rollup_defs, text, text);
ALTER FUNCTION pgsketch.capture_body_shards_v20(pgsketch.rollup_defs, text, text) RENAME TO capture_body_shards;
DROP FUNCTION pgsketch.shard_log_define(text, regclass);
ALTER FUNCTION pgsketch.shard_log_define_v20(text, regclass) RENAME TO shard_log_define;
DROP FUNCTION pgsketch.shard_log_broken(text, regclass);
ALTER FUNCTION pgsketch.shard_log_broken_v20(text, regclass) RENAME TO shard_log_broken;
DROP FUNCTION pgsketch.capture_prepare(text);
ALTER FUNCTION pgsketch.capture_prepare_v20(text) RENAME TO capture_prepare;
DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v20(text, boolean, text, text, integer) RENAME TO refresh_begin;
SELECT pgsketch.capture_rewrite(name, '22') FROM pgsketch.rollup_defs ORDER BY name;
SELECT pgsketch.capture_rewrite_shards(name) FROM pgsketch.rollup_defs ORDER BY name;
DROP FUNCTION pgsketch.capture_rewrite_shards(text);
DO $$
DECLARE
    tbl regclass;
BEGIN
    FOR tbl IN SELECT to_regclass(format('pgsketch.%I', pgsketch.shard_log(d.name))) FROM pgsketch.rollup_defs d LOOP
        IF tbl IS NOT NULL THEN
            PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
            EXECUTE format('ALTER TABLE %s REPLICA IDENTITY DEFAULT', tbl);
        END IF;
    END LOOP;
END $$;
DROP FUNCTION pgsketch.shard_log_identity(text);
