-- pgsketch catalog, version 21: capture_check_logged, the capture check
-- of a statement that counts the changed buckets it reads itself, so that
-- an answer on a distributed source reads its shards' log once.
-- sql/logged_check_v1.sql, included below.

\ir ../sql/logged_check_v1.sql
