package e2e

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/migrations"
	"github.com/pgsketch/pgsketch/refresh"
)

func openMigrator(t *testing.T, dsn string) *migrations.Migrator {
	t.Helper()
	m, err := migrations.Open(dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// migratedDB is a new test database with the catalog at the latest
// version, a connection to it and its migrator.
func migratedDB(t *testing.T) (*testDB, *pgx.Conn, *migrations.Migrator) {
	t.Helper()
	db := newTestDB(t)
	conn := db.Conn(t)
	m := openMigrator(t, db.DSN)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	return db, conn, m
}

// migrateDownTo moves m's catalog down to version v.
func migrateDownTo(t *testing.T, m *migrations.Migrator, v uint) {
	t.Helper()
	cur, _, err := m.Version()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Down(int(cur) - int(v)); err != nil {
		t.Fatal(err)
	}
	wantVersion(t, m, v)
}

func wantVersion(t *testing.T, m *migrations.Migrator, want uint) {
	t.Helper()
	v, dirty, err := m.Version()
	if err != nil {
		t.Fatal(err)
	}
	if v != want || dirty {
		t.Fatalf("version = %d (dirty %v), want %d clean", v, dirty, want)
	}
}

// catalogObjects lists the objects in schema pgsketch with their definitions,
// so that a no-op migration can be told from one that recreated things.
func catalogObjects(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT c.oid::text || ' ' || c.relname || ' ' || c.relkind::text
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = 'pgsketch'
		UNION ALL
		SELECT p.oid::text || ' ' || p.proname || ' ' || md5(p.prosrc)
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'pgsketch'
		UNION ALL
		SELECT con.oid::text || ' ' || con.conname || ' ' || pg_get_constraintdef(con.oid)
		  FROM pg_constraint con JOIN pg_namespace n ON n.oid = con.connamespace
		 WHERE n.nspname = 'pgsketch'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(objs, "\n")
}

func schemaExists(t *testing.T, conn *pgx.Conn) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'pgsketch')`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	conn := db.Conn(t)
	m := openMigrator(t, db.DSN)

	wantVersion(t, m, 0)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	wantVersion(t, m, migrations.Latest())
	before := catalogObjects(t, conn)
	if !strings.Contains(before, "rollup_defs") || !strings.Contains(before, "rollup_measures") {
		t.Fatalf("catalog tables missing after up:\n%s", before)
	}

	// A second up is a no-op: same version, the very same objects (same OIDs).
	if err := m.Up(); err != nil {
		t.Fatalf("second up: %v", err)
	}
	wantVersion(t, m, migrations.Latest())
	if after := catalogObjects(t, conn); after != before {
		t.Fatalf("second up changed the catalog:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	if err := m.Down(-1); err != nil {
		t.Fatal(err)
	}
	wantVersion(t, m, 0)
	if schemaExists(t, conn) {
		t.Fatal("schema pgsketch still exists after down")
	}
	if err := m.Down(-1); err != nil {
		t.Fatalf("down with nothing applied: %v", err)
	}

	if err := m.Up(); err != nil {
		t.Fatalf("up after down: %v", err)
	}
	wantVersion(t, m, migrations.Latest())
	if !schemaExists(t, conn) {
		t.Fatal("schema pgsketch missing after up, down, up")
	}
}

// TestMigrationsDownKeepsUserData: down refuses to drop schema pgsketch while
// it holds a table that migrations did not create (a rollup's data).
func TestMigrationsDownKeepsUserData(t *testing.T) {
	t.Parallel()
	_, conn, m := migratedDB(t)
	mustExec(t, conn, `CREATE TABLE pgsketch.events_daily (bucket date PRIMARY KEY, users bytea)`)
	if err := m.Down(-1); err == nil {
		t.Fatal("down succeeded although schema pgsketch holds a user table")
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pgsketch.events_daily`).Scan(&n); err != nil {
		t.Fatalf("user table gone after refused down: %v", err)
	}
}

func TestCatalogConstraints(t *testing.T) {
	t.Parallel()
	_, conn, _ := migratedDB(t)
	ctx := context.Background()
	insertDef := func(name, grain, tz, dims string) error {
		_, err := conn.Exec(ctx, `INSERT INTO pgsketch.rollup_defs
			(name, source_schema, source_table, rollup_schema, rollup_table, time_column, grain, time_zone, dimensions)
			VALUES ($1, 'public', 'events', 'pgsketch', $1, 'ts', $2, $3, $4::text[])`, name, grain, tz, dims)
		return err
	}
	if err := insertDef("events_daily", "day", "Europe/Berlin", "{country,device}"); err != nil {
		t.Fatalf("a valid rollup was rejected: %v", err)
	}
	insertMeasure := func(col, kind, expr string, log2m, regwidth any, hash any) error {
		_, err := conn.Exec(ctx, `INSERT INTO pgsketch.rollup_measures
			(rollup, column_name, position, kind, expression, log2m, regwidth, hash)
			VALUES ('events_daily', $1, (SELECT coalesce(max(position), 0) + 1 FROM pgsketch.rollup_measures), $2, $3, $4, $5, $6)`,
			col, kind, expr, log2m, regwidth, hash)
		return err
	}
	if err := insertMeasure("users", "hll", "user_id", 14, 5, "xxhash64"); err != nil {
		t.Fatalf("a valid hll measure was rejected: %v", err)
	}
	if err := insertMeasure("n", "count", "*", nil, nil, nil); err != nil {
		t.Fatalf("a valid count measure was rejected: %v", err)
	}

	const checkViolation = "23514"
	for _, tc := range []struct {
		name       string
		err        error
		constraint string
	}{
		{"unknown grain", insertDef("r1", "fortnight", "UTC", "{}"), "grain_known"},
		{"unknown time zone", insertDef("r2", "day", "Mars/Olympus", "{}"), "time_zone_known"},
		{"bad rollup name", insertDef("Bad Name", "day", "UTC", "{}"), "name_format"},
		{"duplicate dimension", insertDef("r3", "day", "UTC", "{country,country}"), "dimensions_valid"},
		{"empty dimension", insertDef("r4", "day", "UTC", `{""}`), "dimensions_valid"},
		{"NULL dimension", insertDef("r5", "day", "UTC", "{NULL}"), "dimensions_valid"},
		{"log2m too small", insertMeasure("u1", "hll", "user_id", 3, 5, "xxhash64"), "log2m_range"},
		{"log2m too large", insertMeasure("u2", "hll", "user_id", 18, 5, "xxhash64"), "log2m_range"},
		{"regwidth 0", insertMeasure("u3", "hll", "user_id", 14, 0, "xxhash64"), "regwidth_range"},
		{"regwidth 6", insertMeasure("u4", "hll", "user_id", 14, 6, "xxhash64"), "regwidth_range"},
		{"unknown hash", insertMeasure("u5", "hll", "user_id", 14, 5, "md5"), "hash_known"},
		{"hll without params", insertMeasure("u6", "hll", "user_id", nil, nil, nil), "sketch_params"},
		{"sum with sketch params", insertMeasure("s1", "sum", "amount", 14, 5, "xxhash64"), "sketch_params"},
		{"unknown kind", insertMeasure("k1", "median", "amount", nil, nil, nil), "kind_known"},
		{"star outside count", insertMeasure("k2", "sum", "*", nil, nil, nil), "expression_set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pgErr *pgconn.PgError
			if !errors.As(tc.err, &pgErr) {
				t.Fatalf("want a check violation, got %v", tc.err)
			}
			if pgErr.Code != checkViolation || pgErr.ConstraintName != tc.constraint {
				t.Fatalf("got SQLSTATE %s constraint %q (%s), want %s %q",
					pgErr.Code, pgErr.ConstraintName, pgErr.Message, checkViolation, tc.constraint)
			}
		})
	}
}

// Rollups and levels created before version 4 store their sketch columns
// compressed; version 5 switches them to uncompressed storage, and the
// sketches still read the same.
func TestMigrationUncompressedSketches(t *testing.T) {
	t.Parallel()
	_, conn, m := migratedDB(t)
	latest := migrations.Latest()
	if latest < 5 {
		t.Fatalf("latest version %d, want at least 5", latest)
	}
	migrateDownTo(t, m, 3)
	mustExec(t, conn, `CREATE TABLE ev (at timestamptz NOT NULL, country text, user_id bigint)`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('old', 'ev', 'at', dimensions => '{country}',
		distinct_columns => '{user_id}')`)
	mustExec(t, conn, `SELECT pgsketch.add_rollup_level('old', 'month')`)
	storage := func() map[string]string {
		t.Helper()
		rows, err := conn.Query(context.Background(), `
			SELECT c.relname || '.' || a.attname, a.attstorage::text
			  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
			 WHERE c.relname IN ('old', 'old_month') AND a.attname = 'distinct_user_id'`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			got[k] = v
		}
		if rows.Err() != nil || len(got) != 2 {
			t.Fatalf("sketch columns: %v (%v), want old.distinct_user_id and old_month.distinct_user_id", got, rows.Err())
		}
		return got
	}
	for col, st := range storage() {
		if st != "x" {
			t.Fatalf("before version 4, %s has storage %q, want x (extended, compressed)", col, st)
		}
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	wantVersion(t, m, latest)
	for col, st := range storage() {
		if st != "e" {
			t.Fatalf("after version 5, %s has storage %q, want e (external, uncompressed)", col, st)
		}
	}
	// Down and up again: the down step leaves storage alone, up is idempotent.
	migrateDownTo(t, m, 4)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	for col, st := range storage() {
		if st != "e" {
			t.Fatalf("after down and up, %s has storage %q, want e", col, st)
		}
	}
}

// Version 6 adds change capture: a rollup made before it is not captured
// (the proxy answers exactly) until its next refresh installs the triggers;
// going down removes every trigger and function, and the source stays
// writable.
func TestMigrationChangeCapture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn, m := migratedDB(t)
	latest := migrations.Latest()
	migrateDownTo(t, m, 5)
	mustExec(t, conn, `CREATE TABLE ev (at timestamptz NOT NULL, country text, user_id bigint);
		INSERT INTO ev SELECT timestamptz '2026-01-01' + i * interval '1 hour', 'DE', i FROM generate_series(1, 100) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('old', 'ev', 'at', dimensions => '{country}', distinct_columns => '{user_id}')`)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	wantVersion(t, m, latest)
	broken := func() *string {
		t.Helper()
		var why *string
		if err := conn.QueryRow(ctx, `SELECT capture_broken FROM pgsketch.rollups WHERE name = 'old'`).Scan(&why); err != nil {
			t.Fatal(err)
		}
		return why
	}
	triggers := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'ev'::regclass AND tgname LIKE 'pgsketch%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if why := broken(); why == nil || triggers() != 0 {
		t.Fatalf("before its first refresh at version 6: capture_broken %v, %d triggers", why, triggers())
	}
	refreshRollup(t, conn, "old", refresh.Options{})
	if why := broken(); why != nil || triggers() != 4 {
		t.Fatalf("after a refresh: capture_broken %q, %d triggers, want none and 4", *why, triggers())
	}
	migrateDownTo(t, m, 5)
	if n := triggers(); n != 0 {
		t.Fatalf("down to version 5 left %d triggers", n)
	}
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-02-01', 'FR', 1); UPDATE ev SET country = 'DE'; DELETE FROM ev WHERE user_id = 1; TRUNCATE ev`)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	if why := broken(); why == nil {
		t.Fatal("up again: captured before any refresh")
	}
}

// TestCatalogWithoutJIT: pgsketch.catalog() turns JIT off for its own
// statement, whose cost estimate passes jit_above_cost: compiling it took
// 190-380 ms where running it takes 3 ms, for every caller in a
// transaction block (where the proxy leaves the session's jit alone), the
// CLI and the refresher. The catalog reads the same with JIT forced on.
func TestCatalogWithoutJIT(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 2_000, 10)
	createRollup(t, conn, "daily", eventsRollupArgs)
	ctx := context.Background()
	var off bool
	if err := conn.QueryRow(ctx, `SELECT 'jit=off' = ANY (proconfig) FROM pg_proc
		WHERE oid = 'pgsketch.catalog()'::regprocedure`).Scan(&off); err != nil {
		t.Fatal(err)
	}
	if !off {
		t.Error("pgsketch.catalog() runs under the caller's jit setting")
	}
	var before, forced string
	if err := conn.QueryRow(ctx, `SELECT pgsketch.catalog()::text`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `SET jit = on; SET jit_above_cost = 0`)
	if err := conn.QueryRow(ctx, `SELECT pgsketch.catalog()::text`).Scan(&forced); err != nil {
		t.Fatal(err)
	}
	if before != forced {
		t.Errorf("the catalog with JIT forced on differs:\n%s\n%s", forced, before)
	}
}

// TestCatalogSchemaNotUsable: a rollup in a schema a role may not use does
// not keep that role from the catalog's other rollups (before catalog
// version 20 pgsketch.catalog() failed for it with "permission denied for
// schema", and pgsketch-proxy answered all of its statements exactly); the
// catalog the role reads lists the rollups it may use, those of the
// schema too once it may use it.
func TestCatalogSchemaNotUsable(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 2_000, 10)
	role := db.Name + "_reader"
	mustExec(t, conn, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN PASSWORD 'reader'; GRANT SELECT ON events TO `+pgx.Identifier{role}.Sanitize())
	t.Cleanup(func() {
		adminExec(context.Background(), `DROP OWNED BY `+pgx.Identifier{role}.Sanitize()+` CASCADE; DROP ROLE IF EXISTS `+pgx.Identifier{role}.Sanitize())
	})
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, `CREATE SCHEMA hidden; CREATE TABLE hidden.ev (LIKE events INCLUDING ALL); INSERT INTO hidden.ev SELECT * FROM events`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('hidden_daily', 'hidden.ev', 'created_at', `+eventsRollupArgs+`)`)
	u, err := url.Parse(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "reader")
	ctx := context.Background()
	names := func() string {
		t.Helper()
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var s string
		if err := c.QueryRow(ctx, `SELECT string_agg(r->>'name', ',' ORDER BY r->>'name') FROM json_array_elements(pgsketch.catalog()) r`).Scan(&s); err != nil {
			t.Fatalf("pgsketch.catalog() as a role that may not use schema hidden: %v", err)
		}
		return s
	}
	if got := names(); got != "daily" {
		t.Errorf("the catalog as %s lists %q, want daily", role, got)
	}
	// Through the proxy, which fingerprints the catalog and reads the
	// collations of the rollups' columns too, the role's distinct counts
	// come from the rollup it may use.
	p := startProxy(t, db.DSN, "--approx", "on")
	nc := connectSimple(t, p.URL(u.String()))
	var n int64
	if err := nc.QueryRow(ctx, `SELECT count(DISTINCT user_id) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	nc.mu.Lock()
	notes := strings.Join(nc.notices, "\n")
	nc.mu.Unlock()
	if !strings.Contains(notes, "from rollup daily") {
		t.Errorf("count(DISTINCT user_id) as %s through the proxy: %d, notices %q; want it answered from rollup daily\n%s", role, n, notes, p.Log())
	}
	mustExec(t, conn, `GRANT USAGE ON SCHEMA hidden TO `+pgx.Identifier{role}.Sanitize())
	if got := names(); got != "daily,hidden_daily" {
		t.Errorf("the catalog as %s, with USAGE on hidden, lists %q, want daily,hidden_daily", role, got)
	}
}
