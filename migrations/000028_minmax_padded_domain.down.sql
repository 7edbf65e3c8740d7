-- Removes version 28: capture_prepare goes back to version 22's. The
-- widened columns stay (a char(1) one failed the refresh).
DROP FUNCTION pgsketch.capture_prepare(text);
ALTER FUNCTION pgsketch.capture_prepare_v22(text) RENAME TO capture_prepare;
DROP FUNCTION pgsketch.widen_minmax(text);
