-- pgsketch catalog, version 8: top-k measures (topk_columns in
-- pgsketch.create_rollup), frequent-items summaries of a column per bucket
-- and dimension values. The objects live in sql/topk_v1.sql, included below.

\ir ../sql/topk_v1.sql
