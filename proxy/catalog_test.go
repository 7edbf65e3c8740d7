package proxy

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/internal/localpg"
	"github.com/pgsketch/pgsketch/migrations"
)

func TestCatalogCache(t *testing.T) {
	var cc catalogCache
	a, b := catalog.NewSnapshot(nil), catalog.NewSnapshot(nil)
	if cc.get("db", "x") != nil {
		t.Fatal("empty cache answered")
	}
	cc.put("db", "x", a)
	cc.put("other", "x", b)
	if cc.get("db", "x") != a || cc.get("other", "x") != b || cc.get("db", "y") != nil {
		t.Fatal("wrong snapshot")
	}
	for i := range maxSnapshots + 1 {
		cc.put("db", fmt.Sprint(i), a)
	}
	if n := len(cc.m["db"]); n > maxSnapshots {
		t.Fatalf("%d snapshots kept, want at most %d", n, maxSnapshots)
	}
}

// catalogDB returns a connection to a new database with the hll extension
// and the pgsketch catalog, and a role name of its own, on
// PGSKETCH_TEST_DSN's server or, without it, a throwaway local cluster.
// Like the end-to-end tests, it fails, naming the packages to install,
// where there is neither. The database and the role are dropped at the
// end.
func catalogDB(t *testing.T) (conn *pgx.Conn, role string) {
	t.Helper()
	ctx := context.Background()
	dsn := localpg.TestServer(t)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	name := fmt.Sprintf("pgsketch_proxy_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Exec(ctx, "DROP ROLE IF EXISTS "+name)
	})
	dsn = localpg.WithDatabase(dsn, name)
	if conn, err = pgx.Connect(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "CREATE EXTENSION hll"); err != nil {
		t.Fatalf("CREATE EXTENSION hll (%s): %v", localpg.InstallHint, err)
	}
	m, err := migrations.Open(dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	return conn, name
}

// TestFingerprint checks that the catalog fingerprint, which runs ahead of
// every answer, changes with each thing it stands for, and finds each
// rollup's rows by index probes: its cost must not grow with the number
// of tables in the database.
func TestFingerprint(t *testing.T) {
	ctx := context.Background()
	conn, role := catalogDB(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE ROLE ` + role)
	exec(`CREATE SCHEMA src`)
	exec(`CREATE TABLE src.ev (created_at timestamptz NOT NULL, country text, user_id bigint)`)
	exec(`GRANT USAGE ON SCHEMA src, pgsketch TO ` + role)
	exec(`GRANT SELECT ON pgsketch.rollup_defs TO ` + role)
	exec(`SELECT pgsketch.create_rollup('ev_daily', 'src.ev', 'created_at', grain => 'day', dimensions => '{country}', distinct_columns => '{user_id}')`)

	fingerprint := func() string {
		t.Helper()
		var fp string
		if err := conn.QueryRow(ctx, fingerprintSQL).Scan(&fp); err != nil {
			t.Fatal(err)
		}
		// A speculation reads it as the last column of viewSQL.
		rows, err := conn.Query(ctx, viewSQL, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var vals []any
		for rows.Next() {
			if vals, err = rows.Values(); err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(vals) != settingsColumns+1 || vals[settingsColumns] != fp {
			t.Fatalf("viewSQL read %v; want %d columns, the last the fingerprint %s", vals, settingsColumns+1, fp)
		}
		return fp
	}
	seen := map[string]string{}
	changed := func(what string) {
		t.Helper()
		fp := fingerprint()
		for was, fp0 := range seen {
			if fp0 == fp {
				t.Errorf("after %s the fingerprint is the one after %s", what, was)
			}
		}
		seen[what] = fp
	}
	changed("the rollup's creation")
	exec(`ALTER TABLE src.ev ENABLE ROW LEVEL SECURITY`)
	changed("row-level security on the source")
	exec(`ALTER TABLE src.ev ADD COLUMN device text`)
	changed("a column added to the source")
	exec(`REVOKE USAGE ON SCHEMA src FROM ` + role)
	exec(`SET ROLE ` + role)
	changed("a role without USAGE on the source's schema")
	exec(`RESET ROLE`)
	exec(`ALTER TABLE src.ev RENAME TO ev_old`)
	changed("the source renamed away")
	exec(`CREATE TABLE src.ev (LIKE src.ev_old)`)
	changed("another source of that name")
	exec(`UPDATE pgsketch.rollup_defs SET version = version + 1`)
	changed("the rollup's version")
	exec(`DROP EXTENSION hll CASCADE`)
	changed("the hll extension dropped")

	var plan string
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+fingerprintSQL).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	for _, node := range strings.Split(plan, `"Node Type": `)[1:] {
		if strings.HasPrefix(node, `"Seq Scan"`) && strings.Contains(strings.SplitN(node, "}", 2)[0], `"Relation Name": "pg_class"`) {
			t.Errorf("the fingerprint reads the whole of pg_class:\n%s", plan)
		}
	}
}
