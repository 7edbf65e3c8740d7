-- Removes version 24: first_seen and first_seen_update go back to version
-- 23's.
DROP FUNCTION pgsketch.first_seen(text, timestamptz, timestamptz);
ALTER FUNCTION pgsketch.first_seen_v23(text, timestamptz, timestamptz) RENAME TO first_seen;
DROP FUNCTION pgsketch.first_seen_update(text, timestamptz);
ALTER FUNCTION pgsketch.first_seen_update_v23(text, timestamptz) RENAME TO first_seen_update;
DROP FUNCTION pgsketch.first_seen_rows(pgsketch.rollup_defs, text, text, timestamptz, timestamptz);
