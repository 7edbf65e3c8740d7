-- pgsketch catalog, version 9: sums of integer and numeric columns added by
-- the refresher in the pass that builds the sketches. The objects live in
-- sql/sums_v1.sql, included below.

\ir ../sql/sums_v1.sql
