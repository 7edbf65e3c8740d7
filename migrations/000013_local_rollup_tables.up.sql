-- pgsketch catalog, version 13: on Citus, a rollup's tables stay local on
-- the coordinator (Citus refuses to distribute them, for their row-level
-- security policy), and one distributed anyway is refused by refresh and
-- never answered from. The objects live in sql/local_rollups_v1.sql,
-- included below.

\ir ../sql/local_rollups_v1.sql
