-- pgsketch catalog, version 18: rows inserted since a refresh are kept
-- beside the rollup (pgsketch.inserts_<rollup>), and a bucket that only
-- gained rows is answered from its rollup rows and those rows instead of
-- being read again from the source. sql/inserts_v1.sql, included below.

\ir ../sql/inserts_v1.sql
