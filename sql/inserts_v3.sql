-- pgsketch catalog objects, version 27: a table of inserted rows names
-- each column's type as format_type does for a column without a modifier
-- (typmod -1), not for an unknown one (NULL). The two differ for the types
-- whose bare SQL name carries a length: NULL gives "character" and "bit",
-- which PostgreSQL reads as char(1) and bit(1), so that a char(4) column
-- the rollup reads became a char(1) column of the table of inserted rows,
-- and every INSERT of a longer value into the source failed while the
-- rollup existed. -1 gives bpchar and "bit", without a length; every other
-- type's name is the same, so no other table is made anew.

-- inserts_columns (version 27): version 18's, with typmod -1.
ALTER FUNCTION pgsketch.inserts_columns(pgsketch.rollup_defs, regclass) RENAME TO inserts_columns_v18;
CREATE FUNCTION pgsketch.inserts_columns(d pgsketch.rollup_defs, src regclass) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT string_agg(format('%I %s%s', a.attname, format_type(a.atttypid, -1),
                                     CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                                          THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END),
                              ', ' ORDER BY c.i)
              FROM unnest(pgsketch.read_columns(d)) WITH ORDINALITY AS c(name, i)
              JOIN pg_attribute a ON a.attrelid = src AND a.attname = c.name AND a.attnum > 0 AND NOT a.attisdropped
              JOIN pg_type t ON t.oid = a.atttypid);

-- inserts_comment is the comment inserts_define gives table tbl of
-- inserted rows, printed from the table's own columns with format_type's
-- typmod typmod (-1 as version 27 prints them, NULL as version 18 did).
CREATE FUNCTION pgsketch.inserts_comment(tbl regclass, typmod integer) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    RETURN 'pgsketch_xid xid8 NOT NULL, pgsketch_bucket timestamptz NOT NULL, ' ||
           (SELECT string_agg(format('%I %s%s', a.attname, format_type(a.atttypid, typmod),
                                     CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                                          THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END),
                              ', ' ORDER BY a.attnum)
              FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
             WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
               AND a.attname NOT IN ('pgsketch_xid', 'pgsketch_bucket'));

-- The tables made before: under the rollup's lock, waiting for the table
-- no longer than DDL of pgsketch's may, a column of a type whose name
-- differs between the two forms loses its length, keeping its rows, and
-- the table's comment (the column list inserts_define compares with the
-- source's, and makes the table anew when they differ) becomes the list
-- the new form gives, so that the table and the rows it holds are kept.
-- The rows' values are cast to the source column's type as they are
-- widened: a char(1) column held 'U' for the source's 'U ' (char(2)),
-- which must read as the source's value does (bytes group the keys).
-- The comment's names are printed as inserts_columns prints them, on its
-- search_path (inserts_comment). A table that stays busy fails the upgrade, to be run
-- again: the table cannot be left as it is (inserts_define would make it
-- anew, and lose its rows, at the next refresh).
DO $do$
DECLARE
    d pgsketch.rollup_defs;
    tbl regclass;
    src regclass;
    col record;
    widened boolean;
BEGIN
    FOR d IN SELECT * FROM pgsketch.rollup_defs ORDER BY name LOOP
        tbl := to_regclass(format('pgsketch.%I', pgsketch.inserts_table(d.name)));
        CONTINUE WHEN tbl IS NULL;
        src := to_regclass(format('%I.%I', d.source_schema, d.source_table));
        PERFORM pg_advisory_xact_lock(pgsketch.lock_class(), hashtext(d.name));
        PERFORM set_config('lock_timeout', pgsketch.ddl_lock_timeout(), true);
        widened := false;
        FOR col IN SELECT a.attname, format_type(a.atttypid, -1) AS bare,
                          (SELECT format_type(s.atttypid, s.atttypmod) FROM pg_attribute s
                            WHERE s.attrelid = src AND s.attname = a.attname AND s.attnum > 0 AND NOT s.attisdropped
                              AND s.atttypid = a.atttypid) AS source_type
                     FROM pg_attribute a
                    WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
                      AND format_type(a.atttypid, NULL) <> format_type(a.atttypid, -1)
                    ORDER BY a.attnum LOOP
            BEGIN
                EXECUTE format('ALTER TABLE %1$s ALTER COLUMN %2$I TYPE %3$s USING CAST(CAST(%2$I AS %4$s) AS %3$s)',
                               tbl, col.attname, col.bare, coalesce(col.source_type, col.bare));
            EXCEPTION WHEN lock_not_available THEN
                RAISE EXCEPTION 'pgsketch: the table of inserted rows of rollup % is busy: %', d.name, SQLERRM
                    USING ERRCODE = 'lock_not_available',
                          HINT = 'Run the upgrade again when fewer writes reach its source.';
            END;
            widened := true;
        END LOOP;
        CONTINUE WHEN NOT widened;
        EXECUTE format('COMMENT ON TABLE %s IS %L', tbl, pgsketch.inserts_comment(tbl, -1));
    END LOOP;
END $do$;
