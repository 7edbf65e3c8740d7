-- pgsketch catalog, version 20: change capture on a source table Citus
-- distributes by hash, through a change log distributed and co-located
-- with it, which the capture triggers on the shards write and every
-- answering statement and refresh read. sql/shards_v1.sql, included below.

\ir ../sql/shards_v1.sql
