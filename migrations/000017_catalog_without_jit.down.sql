-- Removes version 17: pgsketch.catalog() under the caller's jit setting again.

ALTER FUNCTION pgsketch.catalog() RESET jit;
