-- pgsketch catalog, version 26: the Citus checks of an answer over a rollup
-- of a distributed source (hash_distribution, distributed_first,
-- shard_log_broken) read Citus's metadata with statements planned once per
-- session instead of EXECUTE. sql/citus_checks_v1.sql, included below.

\ir ../sql/citus_checks_v1.sql
