-- Removes version 14.

DROP FUNCTION pgsketch.hll_estimate(bytea);
