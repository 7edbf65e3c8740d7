-- capture_check_logged (version 21): the check of an answering statement
-- that reads the range's changed buckets itself (the fetch's own list of
-- them, from pgsketch.rollup_dirty and, for a source Citus distributes,
-- from its shards' log through pgsketch.shard_logged) and passes their
-- number n: capture_check's verdict without reading the logs again (on
-- Citus a read of every shard of the log, the largest part of an answer's
-- time). reads_inserts says whether the statement reads the range's
-- inserted rows (capture_check_inserts); when not, inserted rows in the
-- range fail it, as capture_check does.
CREATE FUNCTION pgsketch.capture_check_logged(r text, lo timestamptz, hi timestamptz, n bigint, reads_inserts boolean)
    RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    why text;
    tbl regclass;
    pending boolean;
BEGIN
    PERFORM pgsketch.require_source_read(r);
    why := pgsketch.capture_broken(r);
    IF why IS NULL AND n > pgsketch.max_dirty_buckets() THEN
        why := format('%s of the buckets in the range changed since its last refresh (more than %s)',
                      n, pgsketch.max_dirty_buckets());
    END IF;
    IF why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format('pgsketch: rollup %s not used: %s', r, why),
            HINT = format('SELECT pgsketch.refresh_rollup(%L) through pgsketch-proxy brings it up to date.', r);
    END IF;
    IF NOT reads_inserts THEN
        tbl := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(r)));
        IF tbl IS NOT NULL THEN
            EXECUTE format('SELECT EXISTS (SELECT FROM %s x WHERE ($1 IS NULL OR x.pgsketch_bucket >= $1) AND ($2 IS NULL OR x.pgsketch_bucket < $2))', tbl)
               INTO pending USING lo, hi;
            IF pending THEN
                RAISE EXCEPTION USING ERRCODE = '55000',
                    MESSAGE = format('pgsketch: rollup %s not used: rows were inserted into its range since its last refresh, which this pgsketch-proxy does not read', r),
                    HINT = 'Upgrade pgsketch-proxy to the version of the catalog (pgsketch-proxy migrate up), or refresh the rollup.';
            END IF;
        END IF;
    END IF;
    RETURN n;
END $$;
COMMENT ON FUNCTION pgsketch.capture_check_logged(text, timestamptz, timestamptz, bigint, boolean) IS
    'n, the number of changed buckets in [lo, hi) of rollup r its caller read, failing (42501, 55000) where the role may not read its source, its change capture is not in place or n is too many';

-- catalog (version 21): version 20's, and per rollup logged_check: the
-- catalog has capture_check_logged.
ALTER FUNCTION pgsketch.catalog() RENAME TO catalog_v20;
CREATE FUNCTION pgsketch.catalog() RETURNS json
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    SET jit = off
    RETURN (
    SELECT coalesce(json_agg((c.r::jsonb || jsonb_build_object('logged_check', true))::json ORDER BY c.o), '[]')
      FROM json_array_elements(pgsketch.catalog_v20()) WITH ORDINALITY AS c(r, o));
