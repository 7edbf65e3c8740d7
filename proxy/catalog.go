package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pgsketch/pgsketch/catalog"
)

var errCatalog = errors.New("rollup catalog")

// fingerprintSQL identifies the state of the catalog as a session sees
// it: every rollup's definition row (its xmin changes with every update,
// and a dropped and re-created rollup has a new row), its source table's
// pg_class row (which changes with ALTER TABLE: row-level security,
// columns added, types changed), whether the session's role may use the
// schemas of the rollup's source and table (pgsketch.catalog() lists only
// the rollups whose schemas it may use), and the hll extension's
// pg_extension row (CREATE, DROP, ALTER EXTENSION ... UPDATE or SET SCHEMA
// change it). A session whose fingerprint is that of a cached snapshot
// gets the snapshot without reading pgsketch.catalog(). Tables are looked
// up by name in the catalogs, which any role may read: to_regclass would
// fail for a schema the role may not use.
//
// It runs ahead of every answer, so its cost is the rollups', not the
// database's: each rollup's rows are found by the catalogs' name indexes,
// one probe each. (Joined instead, PostgreSQL read the whole of pg_class
// into a hash on every query: a cost that grew with every table in the
// database.)
const fingerprintSQL = `SELECT pg_catalog.md5(COALESCE(pg_catalog.string_agg(
   d.name || ':' || d.xmin::text || ':' || d.version::text || ':' ||
   COALESCE((SELECT c.oid::text || ':' || c.xmin::text || ':' || c.relrowsecurity::text
               FROM pg_catalog.pg_class AS c
              WHERE c.relname = d.source_table
                AND c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = d.source_schema)),
            '-:-:-') || ':' ||
   COALESCE((SELECT pg_catalog.has_schema_privilege(n.oid, 'USAGE')::text
               FROM pg_catalog.pg_namespace AS n WHERE n.nspname = d.source_schema), '-') || ':' ||
   COALESCE((SELECT pg_catalog.has_schema_privilege(n.oid, 'USAGE')::text
               FROM pg_catalog.pg_namespace AS n WHERE n.nspname = d.rollup_schema), '-'), ',' ORDER BY d.name), '') ||
   COALESCE((SELECT ';hll:' || e.xmin::text || ':' || e.oid::text FROM pg_catalog.pg_extension AS e
     WHERE e.extname = 'hll'), ''))
 FROM pgsketch.rollup_defs AS d`

// catalogCache holds catalog snapshots per database and fingerprint.
type catalogCache struct {
	mu sync.Mutex
	m  map[string]map[string]*catalog.Snapshot
}

// maxSnapshots bounds the fingerprints kept per database (sessions with
// older snapshots, REPEATABLE READ transactions, see older catalogs).
const maxSnapshots = 8

func (cc *catalogCache) get(db, fp string) *catalog.Snapshot {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.m[db][fp]
}

func (cc *catalogCache) put(db, fp string, snap *catalog.Snapshot) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = map[string]map[string]*catalog.Snapshot{}
	}
	byFP := cc.m[db]
	if byFP == nil || len(byFP) >= maxSnapshots {
		byFP = map[string]*catalog.Snapshot{}
		cc.m[db] = byFP
	}
	byFP[fp] = snap
}

// catalogFor returns the catalog snapshot for the session: the cached one
// of its fingerprint fp, or one read now (with its fingerprint, read first,
// so that a change in between makes the next fingerprint differ rather
// than leave a stale snapshot under a current fingerprint). The caller has
// checked that the role may read the catalog; privileges on the tables are
// checked by the statements a plan runs, on every query.
func (h *Handler) catalogFor(ctx context.Context, c *sessionConn, fp string) (*catalog.Snapshot, error) {
	db := c.s.Params()["database"]
	if db == "" {
		db = c.s.Params()["user"]
	}
	if fp == "" {
		// A session's first query: its fingerprint first, so that a
		// snapshot another session loaded is reused (reading the catalog
		// is the costlier statement, the more so on a new backend).
		rows, errs := c.queryRows(ctx, fingerprintSQL)
		if errs[0] != nil {
			return nil, errs[0]
		}
		if len(rows[0]) == 1 && len(rows[0][0]) == 1 && rows[0][0][0] != nil {
			fp = string(rows[0][0][0])
		}
	}
	if fp != "" {
		if snap := h.catalogs.get(db, fp); snap != nil {
			return snap, nil
		}
	}
	rows, errs := c.queryRows(ctx, fingerprintSQL, catalog.Query, catalog.ExtensionQuery, catalog.CollationQuery)
	if errs[1] != nil {
		return nil, errs[1]
	}
	if len(rows[1]) != 1 || len(rows[1][0]) != 1 {
		return nil, fmt.Errorf("%w: %d rows", errCatalog, len(rows[1]))
	}
	snap, err := catalog.Parse(rows[1][0][0])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCatalog, err)
	}
	if errs[2] != nil {
		return nil, errs[2]
	}
	if len(rows[2]) == 1 && len(rows[2][0]) == 2 {
		snap = snap.WithHLL(catalog.Extension{Schema: string(rows[2][0][0]), Version: string(rows[2][0][1])})
	}
	if errs[3] != nil {
		return nil, errs[3]
	}
	collated := map[string][]string{}
	for _, r := range rows[3] {
		if len(r) != 2 {
			return nil, fmt.Errorf("%w: collations: %d columns", errCatalog, len(r))
		}
		collated[string(r[0])] = append(collated[string(r[0])], string(r[1]))
	}
	snap = snap.WithCollated(collated)
	if errs[0] == nil && len(rows[0]) == 1 && len(rows[0][0]) == 1 && rows[0][0][0] != nil {
		h.catalogs.put(db, string(rows[0][0][0]), snap)
	}
	return snap, nil
}
