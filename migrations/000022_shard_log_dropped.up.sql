-- pgsketch catalog, version 22: a distributed source's change log dropped
-- by hand lets writes through (the capture function looks it up first) and
-- makes the next refresh rebuild every bucket; refreshes on distributed
-- sources run without Citus's local execution; the setting that remembers
-- a transaction's logged bucket no longer skips a write's log row alone.
-- sql/shard_log_v2.sql and sql/capture_memo_v1.sql, included below.

\ir ../sql/shard_log_v2.sql
\ir ../sql/capture_memo_v1.sql
