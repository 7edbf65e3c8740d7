-- Removes version 7: refused while a rollup keeps a theta measure (drop
-- those rollups first); otherwise the functions go back to their version 6
-- forms, kept under other names by the up migration.

DO $$
BEGIN
    IF EXISTS (SELECT FROM pgsketch.rollup_measures WHERE kind = 'theta') THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('rollups %s keep theta measures',
                             (SELECT string_agg(DISTINCT rollup, ', ') FROM pgsketch.rollup_measures WHERE kind = 'theta')),
            HINT = 'Drop them (pgsketch.drop_rollup) before migrating down.';
    END IF;
END $$;

DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v6() RENAME TO catalog;
DROP FUNCTION pgsketch.create_rollup(text, text, text, text, text, text[], text[], text[], text[], text[],
                                     integer, integer, interval, text[], integer);
ALTER FUNCTION pgsketch.create_rollup_v4(text, text, text, text, text, text[], text[], text[], text[], text[],
                                         integer, integer, interval) RENAME TO create_rollup;
DROP FUNCTION pgsketch.refresh_begin(text, boolean, text, text, integer);
ALTER FUNCTION pgsketch.refresh_begin_v6(text, boolean, text, text, integer) RENAME TO refresh_begin;
DROP FUNCTION pgsketch.level_begin(text, text, timestamptz, timestamptz);
ALTER FUNCTION pgsketch.level_begin_v3(text, text, timestamptz, timestamptz) RENAME TO level_begin;
DROP FUNCTION pgsketch.measure_read(regclass, pgsketch.rollup_measures);
DROP FUNCTION pgsketch.theta_column(regclass, text);

ALTER TABLE pgsketch.rollup_measures
    DROP CONSTRAINT kind_known,
    ADD CONSTRAINT kind_known CHECK (kind IN ('hll', 'count', 'sum', 'min', 'max')),
    DROP CONSTRAINT hash_known,
    ADD CONSTRAINT hash_known CHECK (hash IN ('xxhash64')),
    DROP CONSTRAINT sketch_params,
    ADD CONSTRAINT sketch_params CHECK (
        CASE WHEN kind = 'hll' THEN log2m IS NOT NULL AND regwidth IS NOT NULL AND hash IS NOT NULL
             ELSE log2m IS NULL AND regwidth IS NULL AND hash IS NULL END);
COMMENT ON COLUMN pgsketch.rollup_measures.log2m IS NULL;

CREATE OR REPLACE VIEW pgsketch.rollups AS
SELECT d.name,
       format('%I.%I', d.source_schema, d.source_table) AS source,
       format('%I.%I', d.rollup_schema, d.rollup_table) AS rollup_table,
       d.time_column,
       d.grain,
       d.time_zone,
       d.dimensions,
       (SELECT array_agg(CASE WHEN m.kind = 'hll'
                              THEN format('%s: hll(%s) log2m=%s regwidth=%s', m.column_name, m.expression, m.log2m, m.regwidth)
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
