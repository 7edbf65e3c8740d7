-- pgsketch catalog, version 14: pgsketch.hll_estimate, pgsketch's own
-- estimate of a postgresql-hll sketch inside PostgreSQL, for the answers
-- whose sketches PostgreSQL unites (joins to dimension tables), so that
-- they are estimated as the notice says. The function lives in
-- sql/estimate_v1.sql, included below.

\ir ../sql/estimate_v1.sql
