-- catalog (version 16): version 7's, a source column counted as declared
-- NOT NULL only when every table inheriting from the source, at any depth,
-- declares it too. A partition cannot drop the declaration its parent
-- has, but an inheritance child can, and its rows are the source's: a
-- column with NULLs there is no column an overlap or a count may take for
-- never NULL.
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v7;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object(
               'not_null_columns',
               (SELECT coalesce(jsonb_agg(n.col ORDER BY n.ord), '[]')
                  FROM jsonb_array_elements_text(c.r::jsonb -> 'not_null_columns') WITH ORDINALITY AS n(col, ord)
                 WHERE NOT EXISTS (
                       WITH RECURSIVE tree(relid) AS (
                           SELECT i.inhrelid FROM pg_inherits i
                            WHERE i.inhparent = to_regclass(format('%I.%I', c.r->>'source_schema', c.r->>'source_table'))
                           UNION
                           SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.relid)
                       SELECT FROM tree
                         LEFT JOIN pg_attribute a ON a.attrelid = tree.relid AND a.attname = n.col
                                                 AND a.attnum > 0 AND NOT a.attisdropped
                        WHERE a.attnotnull IS NOT TRUE))))::json
               ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v7()) WITH ORDINALITY AS c(r, o));
