-- pgsketch catalog, version 22: a distributed source's change log dropped
-- by hand lets writes through (the capture function looks it up first) and
-- makes the next refresh rebuild every bucket. sql/shard_log_v2.sql,
-- included below.

\ir ../sql/shard_log_v2.sql
