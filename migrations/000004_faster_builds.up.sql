-- pgsketch catalog, version 4: faster rollup builds (uncompressed sketch
-- columns for new rollups, lean rows when no partials are needed). The
-- functions live in sql/rollups_v4.sql, included below.

\ir ../sql/rollups_v4.sql
