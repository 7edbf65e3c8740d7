-- pgsketch catalog, version 24: first-seen bookkeeping reads the rows of a
-- range of buckets by their bucket, as the refresh does (a midnight that
-- happens twice counts from the second); rollups in a zone other than UTC
-- have their bookkeeping built anew by their next refresh.
-- sql/first_seen_v2.sql, included below.

\ir ../sql/first_seen_v2.sql
