-- pgsketch catalog, version 23: first-seen bookkeeping, each key's first
-- bucket and the new keys per bucket, kept exactly by the refresher
-- (pgsketch.add_first_seen, pgsketch.first_seen). sql/first_seen_v1.sql,
-- included below.

\ir ../sql/first_seen_v1.sql
