-- Removes version 21: capture_check_logged goes, and catalog goes back to
-- version 20's.
DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v20() RENAME TO catalog;
DROP FUNCTION pgsketch.capture_check_logged(text, timestamptz, timestamptz, bigint, boolean);
