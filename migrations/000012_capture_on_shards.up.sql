-- pgsketch catalog, version 12: a capture trigger Citus copied onto the
-- shards of a table it distributes never makes a write fail, and rollup
-- drop removes the triggers from every node without any setting. The
-- objects live in sql/capture_v3.sql, included below. Rollups keep being
-- answered across the upgrade.

\ir ../sql/capture_v3.sql
