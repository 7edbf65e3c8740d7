-- Removes version 15: version 14's pgsketch.hll_estimate again.

DROP FUNCTION pgsketch.hll_estimate(bytea);
ALTER FUNCTION pgsketch.hll_estimate_v14(bytea) RENAME TO hll_estimate;
DROP FUNCTION pgsketch.hll_valid(bytea);
