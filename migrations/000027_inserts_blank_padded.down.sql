-- Removes version 27: inserts_columns goes back to its form of version 18.
-- The tables of inserted rows keep their widened columns: the old form
-- would name them otherwise, and inserts_define makes such a table anew at
-- the next refresh (a rollup is refreshed whole after a downgrade anyway).
DROP FUNCTION pgsketch.inserts_columns(pgsketch.rollup_defs, regclass);
ALTER FUNCTION pgsketch.inserts_columns_v18(pgsketch.rollup_defs, regclass) RENAME TO inserts_columns;
