-- pgsketch catalog, version 28: the min or max of a column of a domain over
-- char(n) is kept in a bpchar column, not char(1), for new rollups and
-- those made before. sql/minmax_v1.sql, included below.

\ir ../sql/minmax_v1.sql
