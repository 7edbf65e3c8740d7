-- pgsketch catalog, version 15: pgsketch.hll_estimate gives NaN for bytes
-- that are no sketch (pgsketch.hll_valid, the checks of package sketch's
-- decoder), instead of a plausible count. sql/estimate_v2.sql, included
-- below.

\ir ../sql/estimate_v2.sql
