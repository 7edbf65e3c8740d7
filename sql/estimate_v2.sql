-- pgsketch.hll_estimate (catalog version 15): version 14's estimate, given
-- only for bytes that are a sketch package sketch's HLL.UnmarshalBinary
-- accepts (pgsketch.hll_valid), NaN for any other.
--
-- Version 14 read what it needed of the bytes and trusted the rest, so
-- that some bytes no extension or pgsketch writes (trailing bytes, schema
-- version 2, log2m 0 or 30, repeated or zero SPARSE words, EXPLICIT values
-- out of order) got a plausible count. The statements pgsketch writes only
-- pass it what hll_send returns; a role calling it by hand gets NaN for
-- anything else, which no cast to bigint accepts.

-- hll_valid checks the storage bytes as sketch/encoding.go does: the three
-- header bytes (schema version 1, a known type, the cutoff byte's top bit
-- clear, log2m 4..17, regwidth 1..5, an EXPLICIT cutoff code of 0..14 or
-- automatic), then the data by type: none for UNDEFINED and EMPTY; whole
-- 8-byte values, at most 16 383, strictly ascending as signed integers for
-- EXPLICIT; exactly 2^log2m registers for FULL; for SPARSE at most
-- 2^log2m + 1 words of log2m + regwidth bits, each with a value other
-- than 0 and a register above the word before, but for an all-zero last
-- word lying in the final byte's padding, and fewer than 8 padding bits,
-- all zero.
CREATE FUNCTION pgsketch.hll_valid(s bytea) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp AS $fn$
WITH head AS (
    SELECT get_byte(s, 0) >> 4 AS ver,
           get_byte(s, 0) & 15 AS typ,
           (get_byte(s, 1) >> 5) + 1 AS w,
           get_byte(s, 1) & 31 AS p,
           get_byte(s, 2) AS c,
           length(s) - 3 AS n
     WHERE length(s) >= 3
),
-- SPARSE words: word i at bit i·(p + w) of the data, within four bytes.
words AS (
    SELECT i, (((get_byte(s, 3 + o / 8)::bigint << 24)
                | (CASE WHEN 4 + o / 8 < h.n + 3 THEN get_byte(s, 4 + o / 8) ELSE 0 END << 16)
                | (CASE WHEN 5 + o / 8 < h.n + 3 THEN get_byte(s, 5 + o / 8) ELSE 0 END << 8)
                | CASE WHEN 6 + o / 8 < h.n + 3 THEN get_byte(s, 6 + o / 8) ELSE 0 END)
               >> (32 - h.p - h.w - o % 8)) & ((1::bigint << (h.p + h.w)) - 1) AS word
      FROM head h, LATERAL (SELECT i, i * (h.p + h.w) AS o
                              FROM generate_series(0, CASE WHEN h.typ = 3 AND h.p BETWEEN 4 AND 17 AND h.w BETWEEN 1 AND 5
                                                                AND h.n * 8 / (h.p + h.w) <= (1 << h.p) + 1
                                                           THEN h.n * 8 / (h.p + h.w) - 1 ELSE -1 END) AS i) AS x
),
sparse AS (
    SELECT h.n * 8 / (h.p + h.w) AS cnt, h.n * 8 % (h.p + h.w) AS pad, h.p + h.w AS chunk, h.w, h.n
      FROM head h
),
-- The last word, all zero and inside the final byte's padding, is padding.
trimmed AS (
    SELECT CASE WHEN z THEN cnt - 1 ELSE cnt END AS cnt, CASE WHEN z THEN pad + chunk ELSE pad END AS pad, w, n
      FROM sparse, LATERAL (SELECT cnt > 0 AND pad + chunk < 8
                                   AND (SELECT word FROM words WHERE i = cnt - 1) = 0 AS z) AS l
)
SELECT coalesce((
    SELECT h.ver = 1 AND h.typ <= 4 AND h.c < 128 AND h.p BETWEEN 4 AND 17 AND h.w BETWEEN 1 AND 5
       AND (h.typ NOT IN (1, 2) OR h.c & 63 <= 14 OR h.c & 63 = 63)
       AND CASE
           WHEN h.typ IN (0, 1) THEN h.n = 0
           WHEN h.typ = 2 THEN h.n % 8 = 0 AND h.n / 8 <= 16383
                AND NOT EXISTS (SELECT FROM generate_series(1, h.n / 8 - 1) AS i
                                 WHERE ('x' || encode(substring(s FROM 4 + 8 * (i - 1) FOR 8), 'hex'))::bit(64)::bigint
                                    >= ('x' || encode(substring(s FROM 4 + 8 * i FOR 8), 'hex'))::bit(64)::bigint)
           WHEN h.typ = 4 THEN h.n = (h.w << h.p) / 8
           ELSE h.n * 8 / (h.p + h.w) <= (1 << h.p) + 1
                AND (SELECT t.pad < 8 AND (t.pad = 0 OR get_byte(s, t.n + 2) & ((1 << t.pad) - 1) = 0)
                       AND NOT EXISTS (SELECT FROM words wd WHERE wd.i < t.cnt AND wd.word & ((1 << t.w) - 1) = 0)
                       AND NOT EXISTS (SELECT FROM words a JOIN words b ON b.i = a.i + 1
                                        WHERE b.i < t.cnt AND (b.word >> t.w) <= (a.word >> t.w))
                       FROM trimmed t)
           END
      FROM head h), false)
$fn$;

COMMENT ON FUNCTION pgsketch.hll_valid(bytea) IS
    'whether bytes are a postgresql-hll sketch as pgsketch reads them (sketch.HLL.UnmarshalBinary''s checks)';

ALTER FUNCTION pgsketch.hll_estimate(bytea) RENAME TO hll_estimate_v14;

CREATE FUNCTION pgsketch.hll_estimate(s bytea) RETURNS double precision
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp AS $fn$
SELECT CASE WHEN pgsketch.hll_valid(s) THEN pgsketch.hll_estimate_v14(s) ELSE 'NaN'::double precision END
$fn$;

COMMENT ON FUNCTION pgsketch.hll_estimate(bytea) IS
    'pgsketch''s estimate of a postgresql-hll sketch given as hll_send bytes: exact while EMPTY or EXPLICIT, Ertl''s improved raw estimator over registers; NaN for bytes that are no sketch';
