-- pgsketch catalog objects, version 29: the checks of capture_check_inserts
-- that pass on every answer, as a view a statement reads without calling
-- PL/pgSQL.
--
-- Every answering statement confirms that the rollup's change capture is
-- in place and that the role may read its source. capture_check_inserts
-- does so through a chain of PL/pgSQL functions (require_source_read,
-- capture_broken, distributed_first, capture_fingerprint), each a dozen
-- small catalog reads. A backend compiles the chain on its first answer,
-- and from an idle machine it is most of an answer's work in PostgreSQL.
-- The view below reads the same catalog rows in one plain query, planned
-- with the statement that reads it. It only ever says yes: where it does
-- not (false, or no row), the statement calls capture_check_inserts as
-- before, which fails with the reason (42501, 55000) or counts the changed
-- buckets.

SET search_path = pg_catalog, pg_temp;

-- capture_in_place has a row per rollup; in_place is true only where
-- capture_check_inserts would pass the checks it makes before it counts
-- the changed buckets:
--
-- * require_source_read: the source exists, has no row-level security,
--   and the current role may SELECT all of it (a grant of some columns
--   only is left to the function);
-- * capture_broken: the source is a table or partitioned table, Citus is
--   not installed (its checks stay the functions'), no write's capture
--   failed (rollup_faults), and the source and every relation under it
--   are the relations the last refresh captured, each with the definition
--   it recorded (capture_fingerprint's value, written out below: a change
--   to one without the other only makes in_place false);
-- * capture_check_inserts: the rollup has no log on Citus's shards.
--
-- It is security_invoker, like the functions: has_table_privilege asks
-- for the role that reads it.
CREATE VIEW pgsketch.capture_in_place WITH (security_invoker = true) AS
SELECT d.name AS rollup,
       coalesce(
           c.relkind IN ('r', 'p')
           AND NOT c.relrowsecurity
           AND has_table_privilege(s.src, 'SELECT')
           AND to_regclass('pg_catalog.pg_dist_partition') IS NULL
           AND to_regclass(format('pgsketch.%I', pgsketch.shard_log(d.name))) IS NULL
           AND NOT EXISTS (SELECT FROM pgsketch.rollup_faults f WHERE f.rollup = d.name)
           -- Every relation of the tree captured as recorded ...
           AND NOT EXISTS (
               WITH RECURSIVE t(relid) AS (
                   SELECT s.src::oid
                   UNION
                   SELECT i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.relid)
               SELECT FROM t
                 LEFT JOIN pgsketch.rollup_captured k ON k.rollup = d.name AND k.relid = t.relid
                WHERE k.fingerprint IS NULL
                   OR k.fingerprint IS DISTINCT FROM (
                      SELECT jsonb_build_object(
                          'security', concat_ws(',', x.relrowsecurity, x.relforcerowsecurity),
                          'columns', coalesce((SELECT jsonb_object_agg(a.attname, concat_ws(',', a.attnum, a.atttypid, a.atttypmod,
                                                                                        a.attcollation, a.attnotnull, a.xmin))
                                                 FROM pg_attribute a
                                                WHERE a.attrelid = t.relid
                                                  AND a.attname = ANY (ARRAY(SELECT jsonb_object_keys(k.fingerprint->'columns')))
                                                  AND a.attnum > 0 AND NOT a.attisdropped), '{}'),
                          'triggers', (SELECT string_agg(concat_ws(',', tg.tgname, tg.tgenabled, tg.tgfoid, tg.xmin, p.xmin), ';'
                                                         ORDER BY tg.tgname)
                                         FROM pg_trigger tg LEFT JOIN pg_proc p ON p.oid = tg.tgfoid
                                        WHERE tg.tgrelid = t.relid
                                          AND tg.tgname = ANY (ARRAY[pgsketch.capture_trigger(d.name, 'ins'),
                                                                     pgsketch.capture_trigger(d.name, 'upd'),
                                                                     pgsketch.capture_trigger(d.name, 'del'),
                                                                     pgsketch.capture_trigger(d.name, 'trunc')])))
                        FROM pg_class x WHERE x.oid = t.relid))
           -- ... and nothing captured outside it.
           AND NOT EXISTS (
               SELECT FROM pgsketch.rollup_captured k
                WHERE k.rollup = d.name
                  AND k.relid <> ALL (ARRAY(WITH RECURSIVE t(relid) AS (
                                                SELECT s.src::oid
                                                UNION
                                                SELECT i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.relid)
                                            SELECT relid FROM t))),
           false) AS in_place
  FROM pgsketch.rollup_defs d
 CROSS JOIN LATERAL (SELECT to_regclass(format('%I.%I', d.source_schema, d.source_table)) AS src) s
  LEFT JOIN pg_class c ON c.oid = s.src;
COMMENT ON VIEW pgsketch.capture_in_place IS
    'per rollup, in_place true only where capture_check_inserts would pass its checks of the capture and of the role''s right to read the source; otherwise ask it';
GRANT SELECT ON pgsketch.capture_in_place TO PUBLIC;

-- catalog (version 29): version 23's, and per rollup capture_in_place: the
-- catalog has the view, and Citus is not installed (where the view always
-- sends the statement to the functions).
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v23;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    SET jit = off
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object('capture_in_place',
               to_regclass('pg_catalog.pg_dist_partition') IS NULL))::json ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v23()) WITH ORDINALITY AS c(r, o));
