-- pgsketch catalog, version 19: the tables of inserted rows are indexed
-- by bucket and inserting transaction, so that the rows inserted since a
-- snapshot are read from the index; a TRUNCATE logs the buckets of the
-- inserted rows too; a refresh takes its snapshot of the inserted rows
-- before it lists their buckets. sql/inserts_v2.sql, included below.

\ir ../sql/inserts_v2.sql
