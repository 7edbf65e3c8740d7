-- Removes version 9: measure_read goes back to its version 2 form (sums are
-- PostgreSQL's partials again). Rollup rows are the same either way.

CREATE OR REPLACE FUNCTION pgsketch.measure_read(src regclass, m pgsketch.rollup_measures,
                                      OUT sketched boolean, OUT base_col text, OUT part_col text, OUT field text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    mtype oid;
    form text;
BEGIN
    sketched := m.kind IN ('hll', 'theta', 'topk');
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
                         ELSE format('%s:%s:%s', m.kind, m.log2m, form) END;
END $$;
