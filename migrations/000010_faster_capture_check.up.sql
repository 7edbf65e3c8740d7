-- pgsketch catalog, version 10: the change-capture check that every
-- answered query runs reads the source's partitions once per call. The
-- objects live in sql/capture_v2.sql, included below.

\ir ../sql/capture_v2.sql
