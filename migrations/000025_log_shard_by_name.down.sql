-- Removes version 25: capture_body_shards goes back to version 22's, and
-- the capture functions on distributed sources are written in that form
-- again.
DROP FUNCTION pgsketch.capture_body_shards(pgsketch.rollup_defs, text, text);
ALTER FUNCTION pgsketch.capture_body_shards_v22(pgsketch.rollup_defs, text, text) RENAME TO capture_body_shards;
SELECT pgsketch.capture_rewrite_shards(name) FROM pgsketch.rollup_defs ORDER BY name;
