-- Removes version 8: refused while a rollup keeps a topk measure (drop
-- those rollups first); otherwise the functions go back to their version 7
-- forms.

DO $$
BEGIN
    IF EXISTS (SELECT FROM pgsketch.rollup_measures WHERE kind = 'topk') THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('rollups %s keep topk measures',
                             (SELECT string_agg(DISTINCT rollup, ', ') FROM pgsketch.rollup_measures WHERE kind = 'topk')),
            HINT = 'Drop them (pgsketch.drop_rollup) before migrating down.';
    END IF;
END $$;

DROP FUNCTION pgsketch.create_rollup(text, text, text, text, text, text[], text[], text[], text[], text[],
                                     integer, integer, interval, text[], integer, text[], integer);
ALTER FUNCTION pgsketch.create_rollup_v7(text, text, text, text, text, text[], text[], text[], text[], text[],
                                         integer, integer, interval, text[], integer) RENAME TO create_rollup;
DROP FUNCTION pgsketch.level_begin(text, text, timestamptz, timestamptz);
ALTER FUNCTION pgsketch.level_begin_v7(text, text, timestamptz, timestamptz) RENAME TO level_begin;

ALTER TABLE pgsketch.rollup_measures
    DROP CONSTRAINT kind_known,
    ADD CONSTRAINT kind_known CHECK (kind IN ('hll', 'theta', 'count', 'sum', 'min', 'max')),
    DROP CONSTRAINT sketch_params,
    ADD CONSTRAINT sketch_params CHECK (
        CASE kind WHEN 'hll' THEN log2m IS NOT NULL AND regwidth IS NOT NULL AND hash = 'xxhash64'
                  WHEN 'theta' THEN log2m BETWEEN 5 AND 16 AND regwidth IS NULL AND hash = 'murmur3_128_9001'
                  ELSE log2m IS NULL AND regwidth IS NULL AND hash IS NULL END);
COMMENT ON COLUMN pgsketch.rollup_measures.log2m IS
    'log2 of the sketch size: registers of an hll measure, nominal entries (lg_k) of a theta measure';

-- measure_read and the rollups view as version 7 had them.
CREATE OR REPLACE FUNCTION pgsketch.measure_read(src regclass, m pgsketch.rollup_measures,
                                      OUT sketched boolean, OUT base_col text, OUT part_col text, OUT field text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mtype oid;
    form text;
BEGIN
    sketched := m.kind IN ('hll', 'theta');
    IF NOT sketched THEN
        part_col := CASE WHEN m.expression = '*' THEN ', count(*)' ELSE format(', %s(%I)', m.kind, m.expression) END;
        field := m.kind;
        RETURN;
    END IF;
    mtype := (SELECT CASE WHEN typtype = 'd' THEN typbasetype ELSE oid END
                FROM pg_type WHERE oid = (SELECT atttypid FROM pg_attribute
                                          WHERE attrelid = src AND attname = m.expression));
    base_col := CASE
        WHEN mtype IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'text'::regtype,
                       'character varying'::regtype)
            THEN format(', %I::%s', m.expression, mtype::regtype)
        ELSE format(', CASE WHEN %1$I IS NOT NULL THEN format(''%%s'', %1$I) END', m.expression) END;
    form := CASE mtype WHEN 'smallint'::regtype THEN 'int2' WHEN 'integer'::regtype THEN 'int4'
                       WHEN 'bigint'::regtype THEN 'int8' ELSE 'text' END;
    field := CASE m.kind WHEN 'hll' THEN format('hll:%s:%s:%s', m.log2m, m.regwidth, form)
                         ELSE format('theta:%s:%s', m.log2m, form) END;
END $$;

CREATE OR REPLACE VIEW pgsketch.rollups AS
SELECT d.name,
       format('%I.%I', d.source_schema, d.source_table) AS source,
       format('%I.%I', d.rollup_schema, d.rollup_table) AS rollup_table,
       d.time_column,
       d.grain,
       d.time_zone,
       d.dimensions,
       (SELECT array_agg(CASE m.kind
                              WHEN 'hll' THEN format('%s: hll(%s) log2m=%s regwidth=%s', m.column_name, m.expression, m.log2m, m.regwidth)
                              WHEN 'theta' THEN format('%s: theta(%s) lg_k=%s', m.column_name, m.expression, m.log2m)
                              ELSE format('%s: %s(%s)', m.column_name, m.kind, m.expression) END
                         ORDER BY m.position)
          FROM pgsketch.rollup_measures m WHERE m.rollup = d.name) AS measures,
       d.watermark,
       d.rollup_rows AS rows,
       pg_total_relation_size(to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))) AS bytes,
       d.refreshed_at AS last_refresh,
       now() - d.watermark AS lag,
       d.version,
       pgsketch.capture_broken(d.name) AS capture_broken,
       (SELECT count(DISTINCT x.bucket) FROM pgsketch.rollup_dirty x WHERE x.rollup = d.name) AS dirty_buckets
  FROM pgsketch.rollup_defs d;
