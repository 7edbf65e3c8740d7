-- pgsketch.hll_estimate: pgsketch's estimate of a postgresql-hll sketch,
-- computed inside PostgreSQL.
--
-- Where PostgreSQL itself unites sketches (a join to a dimension table,
-- whose groups only PostgreSQL can form), the answer must still be the
-- estimate whose error the notice states. The extension's hll_cardinality
-- is classic HyperLogLog: linear counting below 2.5·m and the raw estimate
-- above it, which is biased upwards between about 2.5·m and 5·m (some 1 to
-- 4 % at log2m 14) — more than the 1.04/√m a notice states. This function
-- is the estimator of package sketch (HLL.Estimate): exact for EMPTY and
-- EXPLICIT sketches, and for register sketches (SPARSE or FULL) Otmar
-- Ertl's improved raw estimator, "New cardinality estimation algorithms for
-- HyperLogLog sketches" (2017), algorithm 6, with q = 2^regwidth − 2:
--
--   z = m·τ(1 − C[q+1]/m)·2^−q + Σ_{k=1..q} C[k]·2^−k + m·σ(C[0]/m)
--   estimate = m² / (2·ln 2 · z)
--
-- where C[k] is the number of registers holding k,
-- σ(x) = x + Σ_{k≥1} x^(2^k)·2^(k−1) and
-- τ(x) = (1 − x − Σ_{k≥1} (1 − x^(2^−k))²·2^−k) / 3, each summed until a
-- term no longer changes the sum, as sketch/estimate.go does.
--
-- It reads the storage bytes (hll_send(h) gives them; the layout is
-- documented in sketch/doc.go): byte 0 holds the type in its low four
-- bits, byte 1 regwidth − 1 in its high three and log2m in its low five.
-- FULL data packs m registers of regwidth bits MSB-first; SPARSE data packs
-- one word of log2m + regwidth bits per non-zero register (index high,
-- value low). An UNDEFINED sketch, and bytes of no known type, give NaN,
-- which no cast to bigint accepts: the statement fails rather than count
-- an invalid sketch as zero.
--
-- It is written in SQL, not PL/pgSQL, so that a new backend has nothing to
-- compile; a FULL sketch of 2^14 registers takes a few milliseconds.
CREATE FUNCTION pgsketch.hll_estimate(s bytea) RETURNS double precision
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp AS $fn$
WITH RECURSIVE
head AS (
    SELECT get_byte(s, 0) & 15 AS typ,
           (get_byte(s, 1) >> 5) + 1 AS w,
           get_byte(s, 1) & 31 AS p,
           length(s) AS n
     WHERE length(s) >= 3
),
-- The value of every register of a FULL sketch (w bits at bit i·w of the
-- data, which starts at byte 3: within two bytes, as w ≤ 8) and of every
-- register a SPARSE sketch lists (a word of p + w bits at bit i·(p + w),
-- the value its low w bits: within four bytes, as p + w ≤ 25). Bytes past
-- the end read as zero.
regs AS (
    SELECT (((get_byte(s, 3 + i * h.w / 8) << 8)
             | CASE WHEN 4 + i * h.w / 8 < h.n THEN get_byte(s, 4 + i * h.w / 8) ELSE 0 END)
            >> (16 - h.w - i * h.w % 8)) & ((1 << h.w) - 1) AS v
      FROM head h, generate_series(0, CASE WHEN h.typ = 4 THEN (1 << h.p) - 1 ELSE -1 END) AS i
    UNION ALL
    SELECT (((get_byte(s, 3 + o / 8)::bigint << 24)
             | (CASE WHEN 4 + o / 8 < h.n THEN get_byte(s, 4 + o / 8) ELSE 0 END << 16)
             | (CASE WHEN 5 + o / 8 < h.n THEN get_byte(s, 5 + o / 8) ELSE 0 END << 8)
             | CASE WHEN 6 + o / 8 < h.n THEN get_byte(s, 6 + o / 8) ELSE 0 END)
            >> (32 - h.p - h.w - o % 8)) & ((1 << h.w) - 1)
      FROM head h, generate_series(0, CASE WHEN h.typ = 3 THEN (h.n - 3) * 8 - h.p - h.w ELSE -1 END, h.p + h.w) AS o
),
-- C[k] for every k that occurs; a SPARSE sketch's zero registers are those
-- it does not list (a zero word is padding).
hist AS (
    SELECT v, count(*)::double precision AS c FROM regs GROUP BY v
),
counts AS (
    SELECT (1 << h.p)::double precision AS m,
           (1 << h.w) - 2 AS q,
           CASE WHEN h.typ = 4 THEN coalesce((SELECT c FROM hist WHERE v = 0), 0)
                ELSE (1 << h.p) - coalesce((SELECT sum(c) FROM hist WHERE v > 0), 0) END AS c0,
           coalesce((SELECT c FROM hist WHERE v = (1 << h.w) - 1), 0) AS cmax,
           coalesce((SELECT sum(c * 2::double precision ^ (-v)) FROM hist WHERE v BETWEEN 1 AND (1 << h.w) - 2), 0) AS mid
      FROM head h
),
-- σ(C[0]/m): x squared at each step, y doubled, until the sum stands.
sigma(k, x, y, z, prev) AS (
    SELECT 0, c0 / m, 1::double precision, c0 / m, -1::double precision FROM counts WHERE c0 < m
    UNION ALL
    SELECT k + 1, x * x, y + y, z + x * x * y, z FROM sigma WHERE z <> prev AND k < 2000
),
-- τ(1 − C[q+1]/m): x square-rooted at each step, y halved.
tau(k, x, y, z, prev) AS (
    SELECT 0, 1 - cmax / m, 1::double precision, 1 - (1 - cmax / m), -1::double precision
      FROM counts WHERE cmax > 0 AND cmax < m
    UNION ALL
    SELECT k + 1, sqrt(x), y * 0.5, z - (1 - sqrt(x)) * (1 - sqrt(x)) * (y * 0.5), z FROM tau WHERE z <> prev AND k < 2000
),
-- z as above; z is 0 when every register is saturated, and the estimate
-- then +Inf (beyond the sketch's range), as Estimate gives.
est AS (
    SELECT c.m, c.m * coalesce((SELECT t.z / 3 FROM tau t ORDER BY t.k DESC LIMIT 1), 0) * 2::double precision ^ (-c.q)
                + c.mid
                + CASE WHEN c.c0 = c.m THEN 'Infinity'::double precision
                       ELSE c.m * (SELECT g.z FROM sigma g ORDER BY g.k DESC LIMIT 1) END AS z
      FROM counts c
)
SELECT CASE
    WHEN NOT EXISTS (SELECT FROM head) THEN 'NaN'::double precision
    WHEN (SELECT typ FROM head) = 1 THEN 0
    WHEN (SELECT typ FROM head) = 2 THEN ((SELECT n FROM head) - 3) / 8
    WHEN (SELECT typ FROM head) IN (3, 4) THEN
        (SELECT CASE WHEN e.z = 0 THEN 'Infinity'::double precision
                     ELSE (0.5 / ln(2)) * e.m * e.m / e.z END FROM est e)
    ELSE 'NaN'::double precision
END
$fn$;

COMMENT ON FUNCTION pgsketch.hll_estimate(bytea) IS
    'pgsketch''s estimate of a postgresql-hll sketch given as hll_send bytes: exact while EMPTY or EXPLICIT, Ertl''s improved raw estimator over registers';
