-- pgsketch catalog, version 17: pgsketch.catalog() runs its statement with
-- JIT off. The statement's cost estimate (per rollup, a recursive scan of
-- pg_inherits joined to pg_attribute) passes jit_above_cost, and compiling
-- it took 190-380 ms where running it takes 3 ms. pgsketch-proxy turns JIT
-- off for its own statements outside transaction blocks only; inside one,
-- and for every other caller (the CLI, the background refresher), the
-- function's own setting now does.

ALTER FUNCTION pgsketch.catalog() SET jit = off;
