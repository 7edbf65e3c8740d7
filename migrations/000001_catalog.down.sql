-- Removes the version 1 catalog. DROP SCHEMA is not CASCADE on purpose: if
-- rollup tables still live in schema pgsketch, this fails instead of deleting data.
DROP TABLE pgsketch.rollup_measures;
DROP TABLE pgsketch.rollup_defs;
DROP FUNCTION pgsketch.is_identifier_list(text[]);
DROP FUNCTION pgsketch.is_time_zone(text);
DROP SCHEMA pgsketch;
