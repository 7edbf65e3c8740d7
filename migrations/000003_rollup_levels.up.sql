-- pgsketch catalog, version 3: rollup levels, coarser copies of a rollup
-- pre-merged by the refresher (pgsketch.add_rollup_level). The objects live
-- in sql/levels_v1.sql, included below as migration 2 includes its file.

\ir ../sql/levels_v1.sql
