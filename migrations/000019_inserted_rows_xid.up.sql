-- pgsketch catalog, version 19: the tables of inserted rows are indexed
-- by bucket and inserting transaction, so that the rows inserted since a
-- snapshot are read from the index, and a TRUNCATE logs the buckets of the
-- inserted rows too. sql/inserts_v2.sql, included below.

\ir ../sql/inserts_v2.sql
