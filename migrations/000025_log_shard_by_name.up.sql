-- pgsketch catalog, version 25: the capture function on a distributed
-- source's shards writes its log rows into the log's shard on its node by
-- the shard's name rather than through the distributed log.
-- sql/shard_log_v3.sql, included below.

\ir ../sql/shard_log_v3.sql
