-- Removes version 26: hash_distribution, distributed_first and
-- shard_log_broken go back to their forms of versions 20, 13 and 22.
DROP FUNCTION pgsketch.shard_log_broken(text, regclass);
ALTER FUNCTION pgsketch.shard_log_broken_v22(text, regclass) RENAME TO shard_log_broken;
DROP FUNCTION pgsketch.distributed_first(text, regclass);
ALTER FUNCTION pgsketch.distributed_first_v13(text, regclass) RENAME TO distributed_first;
DROP FUNCTION pgsketch.hash_distribution(oid);
ALTER FUNCTION pgsketch.hash_distribution_v20(oid) RENAME TO hash_distribution;
