-- pgsketch catalog, version 27: a char(n) (or bit(n)) column a rollup reads
-- is a bpchar (or bit) column without a length in its table of inserted
-- rows, not char(1): an INSERT of a longer value failed. Tables made
-- before are widened in place, their rows kept. sql/inserts_v3.sql,
-- included below.

\ir ../sql/inserts_v3.sql
