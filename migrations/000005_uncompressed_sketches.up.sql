-- pgsketch catalog, version 5: the sketch columns of rollups and levels
-- created before version 4 are stored uncompressed too (STORAGE EXTERNAL, as
-- create_rollup has set them since version 4). Sketches are near-random
-- bytes that pglz cannot shrink; a compression tried and failed on every
-- written sketch was most of a refresh's writing time. The rows already
-- written keep their form until a refresh rewrites them; nothing is read
-- differently.

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT d.rollup_schema AS sch, d.rollup_table AS tbl, m.column_name AS col
          FROM pgsketch.rollup_defs d JOIN pgsketch.rollup_measures m ON m.rollup = d.name
         WHERE m.kind = 'hll'
        UNION ALL
        SELECT l.table_schema, l.table_name, m.column_name
          FROM pgsketch.rollup_levels l JOIN pgsketch.rollup_measures m ON m.rollup = l.rollup
         WHERE m.kind = 'hll'
    LOOP
        IF EXISTS (SELECT FROM pg_attribute a
                    WHERE a.attrelid = to_regclass(format('%I.%I', r.sch, r.tbl))
                      AND a.attname = r.col AND NOT a.attisdropped AND a.attstorage <> 'e') THEN
            EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I SET STORAGE EXTERNAL', r.sch, r.tbl, r.col);
        END IF;
    END LOOP;
END $$;
