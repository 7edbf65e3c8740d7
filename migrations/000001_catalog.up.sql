-- pgsketch catalog, version 1: schema pgsketch and the rollup catalog (docs/design.md §2.6).
-- One row per rollup in rollup_defs, one row per stored measure in rollup_measures.
-- The CHECK constraints reject definitions pgsketch could never serve.

CREATE SCHEMA pgsketch;
COMMENT ON SCHEMA pgsketch IS 'pgsketch: catalog of HyperLogLog rollups, managed by pgsketch-proxy migrate';

-- is_time_zone reports whether tz is a time zone name PostgreSQL knows
-- (pg_timezone_names, e.g. UTC or Europe/Berlin). Abbreviations and POSIX
-- offsets are rejected: a rollup's buckets must follow a named zone's rules.
CREATE FUNCTION pgsketch.is_time_zone(tz text) RETURNS boolean
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names WHERE name = tz);

-- is_identifier_list reports whether every element of a is a non-empty,
-- non-NULL name and no name appears twice.
CREATE FUNCTION pgsketch.is_identifier_list(a text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN coalesce(array_ndims(a), 1) = 1
       AND array_position(a, NULL) IS NULL
       AND NOT ('' = ANY (a))
       AND cardinality(a) = (SELECT count(DISTINCT x) FROM unnest(a) AS x);

CREATE TABLE pgsketch.rollup_defs (
    name          text        PRIMARY KEY
                              CONSTRAINT name_format CHECK (name ~ '^[a-z_][a-z0-9_]{0,47}$'),
    source_schema text        NOT NULL CONSTRAINT source_schema_set CHECK (source_schema <> ''),
    source_table  text        NOT NULL CONSTRAINT source_table_set CHECK (source_table <> ''),
    rollup_schema text        NOT NULL CONSTRAINT rollup_schema_set CHECK (rollup_schema <> ''),
    rollup_table  text        NOT NULL CONSTRAINT rollup_table_set CHECK (rollup_table <> ''),
    time_column   text        NOT NULL CONSTRAINT time_column_set CHECK (time_column <> ''),
    grain         text        NOT NULL
                              CONSTRAINT grain_known CHECK (grain IN ('hour', 'day', 'week', 'month')),
    time_zone     text        NOT NULL DEFAULT 'UTC'
                              CONSTRAINT time_zone_known CHECK (pgsketch.is_time_zone(time_zone)),
    dimensions    text[]      NOT NULL DEFAULT '{}'
                              CONSTRAINT dimensions_valid CHECK (pgsketch.is_identifier_list(dimensions)
                                                                 AND cardinality(dimensions) <= 32),
    -- Buckets starting before the watermark are complete in the rollup table;
    -- NULL until the first refresh.
    watermark     timestamptz,
    -- Bumped by every change to the rollup's rows, so caches can tell staleness.
    version       bigint      NOT NULL DEFAULT 1 CONSTRAINT version_positive CHECK (version >= 1),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    refreshed_at  timestamptz,
    CONSTRAINT rollup_table_unique UNIQUE (rollup_schema, rollup_table),
    CONSTRAINT rollup_is_not_source CHECK ((rollup_schema, rollup_table) <> (source_schema, source_table))
);
COMMENT ON TABLE pgsketch.rollup_defs IS 'One row per pgsketch rollup: its source, time bucketing and dimensions';

CREATE TABLE pgsketch.rollup_measures (
    rollup      text     NOT NULL REFERENCES pgsketch.rollup_defs (name) ON DELETE CASCADE ON UPDATE CASCADE,
    column_name text     NOT NULL CONSTRAINT column_name_format CHECK (column_name ~ '^[a-z_][a-z0-9_]{0,62}$'),
    position    smallint NOT NULL CONSTRAINT position_positive CHECK (position >= 1),
    -- hll: a sketch of the distinct values of expression; count: count(expression),
    -- or the row count when expression is '*'; sum/min/max: partials of expression.
    kind        text     NOT NULL CONSTRAINT kind_known CHECK (kind IN ('hll', 'count', 'sum', 'min', 'max')),
    expression  text     NOT NULL CONSTRAINT expression_set CHECK (expression <> ''
                                                                   AND (expression <> '*' OR kind = 'count')),
    log2m       smallint CONSTRAINT log2m_range CHECK (log2m BETWEEN 4 AND 17),
    regwidth    smallint CONSTRAINT regwidth_range CHECK (regwidth BETWEEN 1 AND 5),
    hash        text     CONSTRAINT hash_known CHECK (hash IN ('xxhash64')),
    PRIMARY KEY (rollup, column_name),
    CONSTRAINT position_unique UNIQUE (rollup, position),
    -- Sketch parameters are given exactly for sketch measures.
    CONSTRAINT sketch_params CHECK (
        CASE WHEN kind = 'hll' THEN log2m IS NOT NULL AND regwidth IS NOT NULL AND hash IS NOT NULL
             ELSE log2m IS NULL AND regwidth IS NULL AND hash IS NULL END)
);
COMMENT ON TABLE pgsketch.rollup_measures IS 'The measures each pgsketch rollup stores: sketches and partial aggregates';

-- The catalog is metadata: every role may read it (the proxy reads it as the
-- client's role). Rollup data tables carry the grants of their source table.
GRANT USAGE ON SCHEMA pgsketch TO PUBLIC;
GRANT SELECT ON pgsketch.rollup_defs, pgsketch.rollup_measures TO PUBLIC;
