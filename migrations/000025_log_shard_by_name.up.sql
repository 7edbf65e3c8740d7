-- pgsketch catalog, version 25: the capture function on a distributed
-- source's shards finds the log's shard on its node as Citus's metadata
-- and the catalog are now (not as the transaction's snapshot saw them),
-- and writes its log rows into that shard's table by name.
-- sql/shard_log_v3.sql, included below.

\ir ../sql/shard_log_v3.sql
