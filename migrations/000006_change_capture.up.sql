-- pgsketch catalog, version 6: change capture. Statement triggers on each
-- rolled-up source log the buckets every write touches; queries read those
-- buckets from the base table until a refresh rebuilds them, and refuse a
-- rollup whose source changed in ways no trigger sees. The objects live in
-- sql/capture_v1.sql, included below. Rollups created before this version
-- get their triggers at their next refresh, which rebuilds them whole:
-- until then the proxy answers their queries exactly.

\ir ../sql/capture_v1.sql
