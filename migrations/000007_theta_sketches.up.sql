-- pgsketch catalog, version 7: Theta sketch measures (theta_columns in
-- pgsketch.create_rollup), which let the proxy count overlaps and
-- differences of sets. The objects live in sql/theta_v1.sql, included below.

\ir ../sql/theta_v1.sql
