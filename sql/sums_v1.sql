-- pgsketch catalog objects, version 9: sums of integer and numeric columns
-- are added by the refresher from the base rows it streams, in the same
-- pass as the sketches, instead of by PostgreSQL in a second pass over the
-- rows (a GROUP BY branch of the read statement), which cost a build of
-- 20 M rows more than the rest of it. The refresher adds them exactly as
-- sum() does (aggregates/refresh/sums.go); sums of other types, minima,
-- maxima and counts of a column stay PostgreSQL's partials.

-- measure_read (version 3): a sum of a smallint, integer, bigint or
-- numeric column (or a domain over one) is read from the base rows, in its
-- binary form, as field gsum:<form>.
CREATE OR REPLACE FUNCTION pgsketch.measure_read(src regclass, m pgsketch.rollup_measures,
                                      OUT sketched boolean, OUT base_col text, OUT part_col text, OUT field text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mtype oid;
    form text;
BEGIN
    IF m.expression <> '*' THEN
        mtype := (SELECT CASE WHEN typtype = 'd' THEN typbasetype ELSE oid END
                    FROM pg_type WHERE oid = (SELECT atttypid FROM pg_attribute
                                              WHERE attrelid = src AND attname = m.expression));
    END IF;
    IF m.kind = 'sum' AND mtype IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'numeric'::regtype) THEN
        sketched := true;
        base_col := format(', %I::%s', m.expression, mtype::regtype);
        field := 'gsum:' || CASE mtype WHEN 'smallint'::regtype THEN 'int2' WHEN 'integer'::regtype THEN 'int4'
                                       WHEN 'bigint'::regtype THEN 'int8' ELSE 'numeric' END;
        RETURN;
    END IF;
    sketched := m.kind IN ('hll', 'theta', 'topk');
    IF NOT sketched THEN
        part_col := CASE WHEN m.expression = '*' THEN ', count(*)' ELSE format(', %s(%I)', m.kind, m.expression) END;
        field := m.kind;
        RETURN;
    END IF;
    base_col := CASE
        WHEN mtype IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'text'::regtype,
                       'character varying'::regtype)
            THEN format(', %I::%s', m.expression, mtype::regtype)
        ELSE format(', CASE WHEN %1$I IS NOT NULL THEN format(''%%s'', %1$I) END', m.expression) END;
    form := CASE mtype WHEN 'smallint'::regtype THEN 'int2' WHEN 'integer'::regtype THEN 'int4'
                       WHEN 'bigint'::regtype THEN 'int8' ELSE 'text' END;
    field := CASE m.kind WHEN 'hll' THEN format('hll:%s:%s:%s', m.log2m, m.regwidth, form)
                         ELSE format('%s:%s:%s', m.kind, m.log2m, form) END;
END $$;
