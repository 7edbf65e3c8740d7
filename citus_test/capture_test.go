//go:build citus

package citus

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// freshQueries ask row counts, exact from a rollup, beside distinct
// counts: a change the capture missed shows as a count(*) off by the rows
// it wrote. Each row is key columns, then count(*), then count(DISTINCT).
func freshQueries(table string) []string {
	return []string{
		`SELECT country, device, count(*), count(DISTINCT user_id) FROM ` + table +
			` WHERE created_at >= '2026-01-03' AND created_at < '2026-01-20' GROUP BY country, device`,
		`SELECT date_trunc('day', created_at, 'UTC')::text, count(*), count(DISTINCT user_id) FROM ` + table +
			` WHERE created_at >= '2026-01-05' AND created_at < '2026-01-26' GROUP BY 1`,
		`SELECT count(*), count(DISTINCT user_id) FROM ` + table,
		// Ragged: base rows at both edges.
		`SELECT country, count(*), count(DISTINCT user_id) FROM ` + table +
			` WHERE created_at >= '2026-01-04 07:30' AND created_at < '2026-01-18 16:45' GROUP BY country`,
	}
}

// countsRow is one row of a freshQueries query.
type countsRow struct{ rows, distinct float64 }

// keyedRowCounts runs sql (one of freshQueries) in the simple protocol and
// returns its rows by their key columns.
func keyedRowCounts(t *testing.T, conn *pgx.Conn, sql string) map[string]countsRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v (SQLSTATE %s)", sql, err, sqlstate(err))
	}
	out := map[string]countsRow{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		n := len(vals)
		key := fmt.Sprint(vals[:n-2])
		var c countsRow
		for i, p := range []*float64{&c.rows, &c.distinct} {
			switch v := vals[n-2+i].(type) {
			case int64:
				*p = float64(v)
			case float64:
				*p = v
			default:
				t.Fatalf("%s: column %d is %T", sql, n-2+i, v)
			}
		}
		out[key] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v (SQLSTATE %s)", sql, err, sqlstate(err))
	}
	return out
}

// checkFresh asks freshQueries through the proxy and directly: every
// answer must come from the rollup (pgsketch's NOTICE, which must not say
// the rollup was not used), with every row count exact and every distinct
// count within 5 standard errors; unless because is not empty: then every
// answer must be PostgreSQL's own, with a NOTICE containing because. No
// notice but pgsketch's may reach the client.
func checkFresh(t *testing.T, pc *noticeConn, direct *pgx.Conn, table, because string) {
	t.Helper()
	se := 1.04 / math.Sqrt(1<<14)
	for _, q := range freshQueries(table) {
		exact := keyedRowCounts(t, direct, q)
		pc.takeNotices()
		got := keyedRowCounts(t, pc.Conn, q)
		taken := pc.takeNotices()
		notices := strings.Join(taken, "\n")
		for _, n := range taken {
			if !strings.HasPrefix(n, "pgsketch: ") {
				t.Errorf("%s: the client got a notice it did not cause: %q", q, n)
			}
		}
		if len(got) != len(exact) {
			t.Errorf("%s: %d rows through the proxy, %d directly", q, len(got), len(exact))
		}
		keys := make([]string, 0, len(exact))
		for k := range exact {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			e, g := exact[k], got[k]
			switch {
			case g.rows != e.rows:
				t.Errorf("%s: %s: count(*) %v through the proxy, exactly %v (notices %q)", q, k, g.rows, e.rows, notices)
			case because != "" && g.distinct != e.distinct:
				t.Errorf("%s: %s: count(DISTINCT) %v through the proxy, exactly %v (notices %q)", q, k, g.distinct, e.distinct, notices)
			case math.Abs(g.distinct-e.distinct) > 5*se*e.distinct:
				t.Errorf("%s: %s: count(DISTINCT) %v through the proxy, exactly %v: beyond 5 standard errors", q, k, g.distinct, e.distinct)
			}
		}
		switch {
		case because == "" && (!strings.Contains(notices, "approximated from rollup") || strings.Contains(notices, "not used")):
			t.Errorf("%s: not answered from the rollup (notices %q)", q, notices)
		case because != "" && !strings.Contains(notices, because):
			t.Errorf("%s: want an exact answer with a NOTICE saying %q, got %q", q, because, notices)
		}
	}
}

// pendingRows is the number of rows in rollup name's log on a distributed
// source that no refresh has drained.
func pendingRows(t *testing.T, conn *pgx.Conn, name string) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM pgsketch.%s WHERE consumed IS NULL`,
		pgx.Identifier{"log_" + name}.Sanitize())).Scan(&n); err != nil {
		t.Fatalf("rows of the log of %s: %v", name, err)
	}
	return n
}

// TestCitusDistributedCapture: a rollup on a table Citus distributes by
// hash (32 shards over two workers) is built, and every kind of write the
// single-node suite covers is seen through the proxy with no refresh in
// between: inserts into one shard and many, updates moving rows between
// buckets and changing a dimension, deletes, COPY, a rolled-back
// transaction and savepoint, a TRUNCATE on the coordinator and rows
// inserted again. A shard move and a rebalance log nothing, and writes
// after them are seen. A TRUNCATE issued on a worker has the proxy answer
// exactly, saying why, until a refresh. A refresh empties the log and
// rollup verify passes; rollup drop removes log, triggers and functions
// from every node, and writes go on.
func TestCitusDistributedCapture(t *testing.T) {
	ctx := context.Background()
	conn, _, table, name := distributedRollup(t)
	// Four on the table and on its shell on each worker; on each shard
	// the three of INSERT, UPDATE and DELETE (Citus puts no TRUNCATE
	// trigger on a shard).
	if tg, want := captureTriggers(t, name), 4*(1+len(cluster.workers))+3*shardCount; len(tg) != want {
		t.Fatalf("capture triggers after rollup create: %d, want %d: %q", len(tg), want, tg)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkFresh(t, pc, conn, table, "")

	writes := []struct{ name, sql string }{
		{"insert one shard", `INSERT INTO %[1]s VALUES (90000001, '2026-01-10 12:00+00', 7, 'DE', 'ios', 1)`},
		{"insert many shards", `INSERT INTO %[1]s SELECT 90000100 + g, '2026-01-12 13:00+00', 900000 + g, 'FR', 'web', 2 FROM generate_series(1, 100) g`},
		// Citus refuses a STABLE function of a column in an UPDATE
		// (timestamptz + interval is one): the rows of many buckets move
		// to one.
		{"update moving rows between buckets", `UPDATE %[1]s SET created_at = '2026-01-17 06:00+00' WHERE user_id BETWEEN 100 AND 140 AND created_at < '2026-01-20'`},
		{"update of a dimension", `UPDATE %[1]s SET country = 'ES' WHERE user_id BETWEEN 200 AND 220`},
		{"delete", `DELETE FROM %[1]s WHERE user_id BETWEEN 300 AND 330`},
		{"rolled back", `BEGIN; INSERT INTO %[1]s SELECT 90001000 + g, '2026-01-11 10:00+00', 910000 + g, 'JP', 'ios', 1 FROM generate_series(1, 500) g; ROLLBACK`},
		{"savepoint rolled back", `BEGIN; INSERT INTO %[1]s VALUES (90002001, '2026-01-14 09:00+00', 920001, 'CA', 'web', 1);
			SAVEPOINT s; INSERT INTO %[1]s SELECT 90002100 + g, '2026-01-16 09:00+00', 920100 + g, 'CA', 'web', 1 FROM generate_series(1, 50) g;
			ROLLBACK TO SAVEPOINT s; COMMIT`},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			if _, err := conn.Exec(ctx, fmt.Sprintf(w.sql, table)); err != nil {
				t.Fatalf("%s: %v (SQLSTATE %s)", w.name, err, sqlstate(err))
			}
			checkFresh(t, pc, conn, table, "")
		})
	}
	t.Run("copy", func(t *testing.T) {
		var rows [][]any
		for i := int64(1); i <= 20; i++ {
			rows = append(rows, []any{90003000 + i, "2026-01-15 15:00:00+00", 930000 + i, "JP", "ios", "4.00"})
		}
		st := strings.SplitN(table, ".", 2)
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{st[0], st[1]}, []string{"id", "created_at", "user_id", "country", "device", "amount"},
			pgx.CopyFromRows(rows)); err != nil {
			t.Fatalf("COPY: %v", err)
		}
		checkFresh(t, pc, conn, table, "")
	})
	t.Run("truncate on the coordinator", func(t *testing.T) {
		mustExec(t, conn, "TRUNCATE "+table)
		checkFresh(t, pc, conn, table, "")
		insertEvents(t, conn, table, 1, eventsRows)
		checkFresh(t, pc, conn, table, "")
	})

	refresh := func(t *testing.T) {
		t.Helper()
		if r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
			t.Fatalf("rollup refresh: %s", r)
		}
		if n := pendingRows(t, conn, name); n != 0 {
			t.Errorf("%d rows in the log not drained after a refresh", n)
		}
	}
	t.Run("refresh", func(t *testing.T) {
		refresh(t)
		if r := cli(t, "rollup", "verify", name, "--buckets", "40", "--dsn", coordURL()); r.code != 0 {
			t.Errorf("rollup verify: %s", r)
		}
		checkFresh(t, pc, conn, table, "")
	})

	// The source's and the log's shard placements, by shard index.
	t.Run("shard move", func(t *testing.T) {
		var shard int64
		var port int
		if err := conn.QueryRow(ctx, `SELECT s.shardid, p.nodeport FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)
			WHERE s.logicalrelid = $1::regclass ORDER BY s.shardid LIMIT 1`, table).Scan(&shard, &port); err != nil {
			t.Fatal(err)
		}
		to := cluster.workers[0].Port
		if to == port {
			to = cluster.workers[1].Port
		}
		mustExec(t, conn, fmt.Sprintf(`SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d, shard_transfer_mode => 'block_writes')`,
			shard, port, to))
		if n := pendingRows(t, conn, name); n != 0 {
			t.Errorf("%d rows in the log after moving a shard with no write", n)
		}
		checkFresh(t, pc, conn, table, "")
		// A write to every shard, the moved one's too.
		mustExec(t, conn, fmt.Sprintf(`INSERT INTO %s SELECT 90004000 + g, '2026-01-13 08:00+00', g, 'BR', 'android', 5 FROM generate_series(1, 2000) g`, table))
		checkFresh(t, pc, conn, table, "")
	})
	t.Run("rebalance", func(t *testing.T) {
		refresh(t)
		mustExec(t, conn, `SELECT rebalance_table_shards(shard_transfer_mode => 'block_writes')`)
		if n := pendingRows(t, conn, name); n != 0 {
			t.Errorf("%d rows in the log after a rebalance with no write", n)
		}
		mustExec(t, conn, fmt.Sprintf(`UPDATE %s SET created_at = '2026-01-04 08:00+00' WHERE id > 90004000 AND id <= 90005000`, table))
		checkFresh(t, pc, conn, table, "")
	})
	t.Run("snapshot older than the refresh", func(t *testing.T) {
		// A transaction whose snapshot on the coordinator predates a
		// refresh, and whose first read on the workers follows it, would
		// read the old rollup rows and, without the log rows the refresh
		// drained, count short. Inside a transaction block a rollup on a
		// distributed source is not read at all (the statement cannot have
		// a transaction of its own): exact answers, saying why. (Outside
		// one, a refresh can still commit between the statement's
		// snapshot on the coordinator and its first read of a worker: the
		// drained rows are marked, not deleted, for that.)
		mustExec(t, conn, fmt.Sprintf(`INSERT INTO %s SELECT 90006000 + g, '2026-01-08 08:00+00', 940000 + g, 'IN', 'web', 1 FROM generate_series(1, 100) g`, table))
		mustExec(t, pc.Conn, "BEGIN ISOLATION LEVEL REPEATABLE READ")
		defer pc.Exec(ctx, "ROLLBACK")
		var n int64
		if err := pc.QueryRow(ctx, "SELECT count(*) FROM pgsketch.rollup_defs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		refresh(t)
		checkFresh(t, pc, conn, table, "transaction of its own")
	})
	t.Run("truncate on a worker", func(t *testing.T) {
		w := connect(t, cluster.workers[1].URL(database))
		mustExec(t, w, "TRUNCATE "+table)
		checkFresh(t, pc, conn, table, "truncated on a Citus worker")
		insertEvents(t, conn, table, 1, eventsRows)
		checkFresh(t, pc, conn, table, "truncated on a Citus worker")
		refresh(t)
		checkFresh(t, pc, conn, table, "")
	})
	t.Run("drop", func(t *testing.T) {
		if r := cli(t, "rollup", "drop", name, "--dsn", coordURL()); r.code != 0 {
			t.Fatalf("rollup drop: %s", r)
		}
		if relationExists(t, conn, "pgsketch.log_"+name) {
			t.Errorf("the log of %s exists after rollup drop", name)
		}
		if tg := captureTriggers(t, name); len(tg) != 0 {
			t.Errorf("%d capture triggers left after rollup drop: %q ...", len(tg), tg[:1])
		}
		if fn := captureFunctions(t, name); len(fn) != 0 {
			t.Errorf("capture functions left after rollup drop: %q", fn)
		}
		writeAll(t, coordURL(), table, 95_000_000)
		checkAnswers(t, pc, conn, table, exactAnswer, "")
	})
}

// TestCitusMigrateDownDistributedCapture: migrating the catalog down from
// the version that captures distributed sources, with a rollup on one in
// place, must leave every write to the table working (the capture
// function on the shards wrote to a log the downgrade drops) and the
// rollup answered exactly; migrating up again and a refresh capture the
// table again.
func TestCitusMigrateDownDistributedCapture(t *testing.T) {
	conn, _, table, name := distributedRollup(t)
	t.Cleanup(func() { migrateUp(t) })
	// Down to version 19, the last without capture on distributed sources.
	migrateDownTo(t, 19)
	if relationExists(t, conn, "pgsketch.log_"+name) {
		t.Errorf("the log of %s exists after migrate down", name)
	}
	writeAll(t, coordURL(), table, 96_000_000)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkAnswers(t, pc, conn, table, exactAnswer, "")

	migrateUp(t)
	if r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
		t.Fatalf("rollup refresh after migrate up: %s", r)
	}
	writeAll(t, coordURL(), table, 97_000_000)
	checkFresh(t, pc, conn, table, "")
}

// TestCitusDistributedCaptureEdges: what a red team found of the capture on
// distributed sources, each kept as a case. A distribution column of a
// type without min() (uuid), with a length (char(5)) or another collation
// (text COLLATE "C") is captured like any other (with uuid and char(5)
// nothing was logged and answers were short). INSERT ... SELECT issued on a
// worker succeeds and is seen (it failed: the trigger's error trap sent a
// SAVEPOINT over connections busy with the statement). A table whose
// shards are replicated is refused, and its writes keep working (every
// write failed). After update_distributed_table_colocation and
// alter_distributed_table, which leave the log no longer distributed with
// the table, writes succeed, answers are exact until a refresh, which
// rebuilds the rollup whole (the changes logged before were lost).
func TestCitusDistributedCaptureEdges(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())

	// small makes schema.name distributed by column key (of type typ),
	// 20 000 rows over January 2026, and its daily rollup by country.
	small := func(t *testing.T, name, typ, key string) (table, rollup string) {
		t.Helper()
		table, rollup = schema+"."+name, schema+"_"+name
		mustExec(t, conn, fmt.Sprintf(`CREATE TABLE %s (id bigint NOT NULL, created_at timestamptz NOT NULL, k %s NOT NULL,
			user_id bigint NOT NULL, country text, device text NOT NULL)`, table, typ))
		mustExec(t, conn, fmt.Sprintf(`SELECT create_distributed_table('%s', '%s', shard_count => 4)`, table, key))
		mustExec(t, conn, fmt.Sprintf(`INSERT INTO %s SELECT i, timestamptz '2026-01-01' + i * interval '2 minutes', %s, i %% 3000,
			(ARRAY['US','DE','FR'])[1 + i %% 3], 'web' FROM generate_series(1, 20000) i`, table, keyExpr(typ, "i")))
		if r := cli(t, "rollup", "create", rollup, "--table", table, "--dsn", coordURL(),
			"--time", "created_at", "--dims", "country,device", "--distinct", "user_id", "--log-level", "warn"); r.code != 0 {
			t.Fatalf("rollup create: %s", r)
		}
		return table, rollup
	}
	for _, c := range []struct{ name, typ string }{{"uuid_key", "uuid"}, {"char_key", "char(5)"}, {"c_key", `text COLLATE "C"`}} {
		t.Run(c.name, func(t *testing.T) {
			table, _ := small(t, c.name, c.typ, "k")
			mustExec(t, conn, fmt.Sprintf(`INSERT INTO %s SELECT 100000 + g, '2026-01-05 10:00+00', %s, 50000 + g, 'ES', 'web' FROM generate_series(1, 300) g`,
				table, keyExpr(c.typ, "g")))
			mustExec(t, conn, `DELETE FROM `+table+` WHERE user_id BETWEEN 100 AND 200`)
			checkFresh(t, pc, conn, table, "")
		})
	}
	t.Run("insert select on a worker", func(t *testing.T) {
		table, _ := small(t, "from_worker", "bigint", "user_id")
		w := connect(t, cluster.workers[0].URL(database))
		for _, sql := range []string{
			`INSERT INTO %s SELECT 200000 + g, '2026-01-12 13:00+00', g, 200000 + g, 'FR', 'web' FROM generate_series(1, 100) g`,
			`WITH x AS (SELECT g FROM generate_series(1, 50) g) INSERT INTO %s SELECT 300000 + g, '2026-01-13 13:00+00', g, 300000 + g, 'JP', 'web' FROM x`,
		} {
			if _, err := w.Exec(ctx, fmt.Sprintf(sql, table)); err != nil {
				t.Errorf("on a worker: %s: %v", sql, err)
			}
		}
		checkFresh(t, pc, conn, table, "")
	})
	t.Run("replicated shards", func(t *testing.T) {
		table := schema + ".replicated"
		mustExec(t, conn, `SET citus.shard_replication_factor = 2`)
		mustExec(t, conn, `CREATE TABLE `+table+` (id bigint NOT NULL, created_at timestamptz NOT NULL, user_id bigint NOT NULL, country text, device text NOT NULL)`)
		mustExec(t, conn, `SELECT create_distributed_table('`+table+`', 'user_id', shard_count => 3)`)
		mustExec(t, conn, `RESET citus.shard_replication_factor`)
		mustExec(t, conn, `INSERT INTO `+table+` SELECT i, timestamptz '2026-01-01' + i * interval '2 minutes', i % 4096, 'US', 'web' FROM generate_series(1, 2000) i`)
		name := schema + "_replicated"
		r := rollupCreate(t, coordURL(), name, table)
		if r.code != 1 || !strings.Contains(r.stderr, "SQLSTATE 0A000") {
			t.Errorf("rollup create on a table with replicated shards: %s; want a refusal with SQLSTATE 0A000", r)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO `+table+` VALUES (900001, '2026-01-05 10:00+00', 77, 'DE', 'web')`); err != nil {
			t.Errorf("write after the refused create: %v", err)
		}
	})
	for _, move := range []struct{ name, sql string }{
		{"update_distributed_table_colocation", `SELECT update_distributed_table_colocation('%s', colocate_with => 'none')`},
		{"alter_distributed_table", `SET citus.enable_unsafe_triggers = on; SELECT alter_distributed_table('%s', shard_count => 6, cascade_to_colocated => false); RESET citus.enable_unsafe_triggers`},
	} {
		t.Run(move.name, func(t *testing.T) {
			table, rollup := small(t, strings.Split(move.name, "_")[0]+"_moved", "bigint", "user_id")
			// A change logged before the move, then the move, then more.
			mustExec(t, conn, `INSERT INTO `+table+` SELECT 400000 + g, '2026-01-07 10:00+00', g, 400000 + g, 'IT', 'web' FROM generate_series(1, 100) g`)
			mustExec(t, conn, fmt.Sprintf(move.sql, table))
			for _, sql := range []string{
				`INSERT INTO %s SELECT 500000 + g, '2026-01-08 10:00+00', g, 500000 + g, 'IT', 'web' FROM generate_series(1, 100) g`,
				`DELETE FROM %s WHERE created_at >= '2026-01-10' AND created_at < '2026-01-11'`,
			} {
				if _, err := conn.Exec(ctx, fmt.Sprintf(sql, table)); err != nil {
					t.Errorf("after %s: %s: %v", move.name, sql, err)
				}
			}
			checkFresh(t, pc, conn, table, "not used")
			if r := cli(t, "rollup", "refresh", rollup, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
				t.Fatalf("rollup refresh: %s", r)
			}
			checkFresh(t, pc, conn, table, "")
			mustExec(t, conn, `UPDATE `+table+` SET country = 'NL' WHERE user_id BETWEEN 10 AND 40`)
			checkFresh(t, pc, conn, table, "")
		})
	}
}

// keyExpr is an expression of type typ made from integer expression i:
// distinct values for distinct i.
func keyExpr(typ, i string) string {
	switch {
	case typ == "uuid":
		return "md5((" + i + " % 50)::text)::uuid"
	case strings.HasPrefix(typ, "char"):
		return "lpad((" + i + " % 50)::text, 5, 'x')"
	case strings.HasPrefix(typ, "text"):
		return "'k' || (" + i + " % 50)"
	}
	return i + " % 3000"
}

// TestCitusDistributedCaptureOneSnapshot: a write that commits on a worker
// between the answering statement's read of the change log and its read of
// the base rows must not be counted twice or lost. Here an UPDATE moves a
// row from a day the rollup holds to after its watermark, and commits
// while the statement waits for the row's shard (locked by the writer) to
// read the rows after the watermark. Before the statement read each worker
// in one snapshot (REPEATABLE READ, one connection per worker), the row
// was counted in its old day's rollup row and again after the watermark:
// count(*) one too many. Inside a transaction block, where the statement
// cannot have a transaction of its own, the proxy answers exactly and says
// why.
func TestCitusDistributedCaptureOneSnapshot(t *testing.T) {
	ctx := context.Background()
	conn, schema, table, _ := distributedRollup(t)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	q := `SELECT count(*), count(DISTINCT user_id) FROM ` + table + ` WHERE created_at >= '2026-01-01' AND created_at < '2026-02-10'`
	var want int64
	if err := conn.QueryRow(ctx, q).Scan(&want, new(int64)); err != nil {
		t.Fatal(err)
	}

	var id, user, shard int64
	var port int
	if err := conn.QueryRow(ctx, `SELECT e.id, e.user_id, s, p.nodeport FROM `+table+` e,
		LATERAL get_shard_id_for_distribution_column($1::regclass, e.user_id) AS s
		JOIN pg_dist_shard_placement p ON p.shardid = s
		WHERE e.created_at >= '2026-01-05' AND e.created_at < '2026-01-06' LIMIT 1`, table).Scan(&id, &user, &shard, &port); err != nil {
		t.Fatal(err)
	}
	w := connect(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, database))
	shardTable := pgx.Identifier{schema, fmt.Sprintf("events_%d", shard)}.Sanitize()
	locked, done := make(chan error, 1), make(chan error, 1)
	go func() {
		tx, err := w.Begin(ctx)
		if err == nil {
			_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET created_at = '2026-02-03 15:00+00' WHERE user_id = %d AND id = %d`, table, user, id))
		}
		if err == nil {
			_, err = tx.Exec(ctx, `SET LOCAL citus.override_table_visibility = off; SET LOCAL citus.enable_manual_changes_to_shards = on; LOCK TABLE `+
				shardTable+` IN ACCESS EXCLUSIVE MODE`)
		}
		locked <- err
		if err != nil {
			done <- err
			return
		}
		time.Sleep(2 * time.Second)
		done <- tx.Commit(ctx)
	}()
	if err := <-locked; err != nil {
		t.Fatalf("the writer on port %d: %v", port, err)
	}
	pc.takeNotices()
	var got int64
	if err := pc.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&got, new(int64)); err != nil {
		t.Fatal(err)
	}
	notices := strings.Join(pc.takeNotices(), "\n")
	if err := <-done; err != nil {
		t.Fatalf("the writer's commit: %v", err)
	}
	if got != want || !strings.Contains(notices, "approximated from rollup") {
		t.Errorf("count(*) through the proxy while the row moved: %d (notices %q), want %d from the rollup", got, notices, want)
	}

	tx, err := pc.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := tx.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&got, new(int64)); err != nil {
		t.Fatal(err)
	}
	if notices := strings.Join(pc.takeNotices(), "\n"); got != want || !strings.Contains(notices, "transaction of its own") {
		t.Errorf("count(*) through the proxy in a transaction block: %d (notices %q), want %d exactly, saying why", got, notices, want)
	}
}

// distributedEvents makes, in a schema of its own, the events table
// distributed by user_id (createEvents), and returns a connection to the
// coordinator, the schema, the table and the name its daily rollup takes.
func distributedEvents(t *testing.T) (conn *pgx.Conn, schema, table, name string) {
	t.Helper()
	conn = connect(t, coordURL())
	schema = newSchema(t, conn)
	return conn, schema, createEvents(t, conn, schema, true), schema + "_daily"
}

// distributedRollup makes distributedEvents' table and its daily rollup,
// and returns what distributedEvents returns.
func distributedRollup(t *testing.T) (conn *pgx.Conn, schema, table, name string) {
	t.Helper()
	conn, schema, table, name = distributedEvents(t)
	if r := rollupCreate(t, coordURL(), name, table); r.code != 0 {
		t.Fatalf("rollup create on a distributed table: %s", r)
	}
	return conn, schema, table, name
}

// TestCitusDroppedLog: a DBA drops a rollup's change log on a distributed
// source. Writes on the coordinator and on a worker go through (every one
// failed: the capture function looked the log up without checking it was
// there), answers are exact and say why, and the next refresh rebuilds
// every bucket, the writes made without a log among them (it made the log
// again and refreshed only the buckets logged). The rollup is made at
// catalog version 21 and migrated up, so that the migration's rewrite of
// capture functions on distributed sources is what is tested.
func TestCitusDroppedLog(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { migrateUp(t) })
	migrateDownTo(t, 21)
	conn, _, table, name := distributedRollup(t)
	migrateUp(t)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkFresh(t, pc, conn, table, "")

	// A change logged and not refreshed yet goes with the log.
	mustExec(t, conn, `INSERT INTO `+table+` SELECT 6000000 + g, '2026-01-20 10:00+00', 600000 + g, 'NL', 'web', 1 FROM generate_series(1, 40) g`)
	mustExec(t, conn, `DROP TABLE `+pgx.Identifier{"pgsketch", "log_" + name}.Sanitize())
	writeAll(t, coordURL(), table, 7_000_000)
	writeAll(t, cluster.workers[0].URL(database), table, 8_000_000)
	if _, err := conn.Exec(ctx, `UPDATE `+table+` SET created_at = '2026-01-25 08:00+00' WHERE user_id % 97 = 0 AND created_at < '2026-01-05'`); err != nil {
		t.Errorf("an update moving rows between buckets without the log: %v", err)
	}
	checkFresh(t, pc, conn, table, "or the log was dropped")

	refreshRollup(t, name)
	checkFresh(t, pc, conn, table, "")
	writeAll(t, coordURL(), table, 9_000_000)
	checkFresh(t, pc, conn, table, "")
}

// TestCitusLogShardByName: a rollup on a distributed source made at
// catalog version 24, whose capture function on the shards inserts into
// the distributed log, has it written again by migrate up on every node,
// to insert into the log's shard by its name; the rollup stays answered
// from without a refresh (its recorded definition follows the function),
// and writes on the coordinator and on a worker are logged and seen. Down
// to 24 and up again, the same.
func TestCitusLogShardByName(t *testing.T) {
	t.Cleanup(func() { migrateUp(t) })
	migrateDownTo(t, 24)
	conn, _, table, name := distributedRollup(t)
	byName := func(t *testing.T, want bool) {
		t.Helper()
		for _, n := range allNodes() {
			c := connect(t, n.URL(database))
			var src string
			err := c.QueryRow(context.Background(), `SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure(format('pgsketch.%I()', 'capture_' || $1::text))`, name).Scan(&src)
			c.Close(context.Background())
			if err != nil {
				t.Fatalf("the capture function of %s on node %d: %v", name, n.Port, err)
			}
			if got := strings.Contains(src, "shard_name("); got != want {
				t.Errorf("node %d: the capture function of %s inserts into the log's shard by name: %v, want %v", n.Port, name, got, want)
			}
		}
	}
	byName(t, false)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	writeAll(t, coordURL(), table, 3_000_000)

	migrateUp(t)
	byName(t, true)
	checkFresh(t, pc, conn, table, "")
	writeAll(t, coordURL(), table, 3_100_000)
	writeAll(t, cluster.workers[1].URL(database), table, 3_200_000)
	checkFresh(t, pc, conn, table, "")

	migrateDownTo(t, 24)
	byName(t, false)
	writeAll(t, coordURL(), table, 3_300_000)
	checkFresh(t, pc, conn, table, "")
	migrateUp(t)
	byName(t, true)
	writeAll(t, cluster.workers[0].URL(database), table, 3_400_000)
	checkFresh(t, pc, conn, table, "")
}

// snapshotTx begins a REPEATABLE READ transaction on url and takes its
// snapshot; the test's end rolls it back if it is still open.
func snapshotTx(t *testing.T, url string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := connect(t, url).BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM pg_dist_placement`); err != nil {
		t.Fatal(err)
	}
	return tx
}

// commitLogged commits tx and checks that rollup name's log gained want
// rows since it held before.
func commitLogged(t *testing.T, tx pgx.Tx, conn *pgx.Conn, name string, before, want int64) {
	t.Helper()
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := pendingRows(t, conn, name); after != before+want {
		t.Errorf("the log gained %d rows from the transaction's writes, want %d", after-before, want)
	}
}

// TestCitusSnapshotBeforeMove: a REPEATABLE READ transaction on a worker
// takes its snapshot; a shard group then moves onto that worker; the
// transaction writes a row of that group and commits. The capture logs it,
// and the answer through the proxy counts it. (The capture function looked
// the log's placement up in pg_dist_placement, through the transaction's
// snapshot, which still had the shard on the other worker: it let the
// write through unlogged, and the answer missed the row until a full
// refresh.)
func TestCitusSnapshotBeforeMove(t *testing.T) {
	ctx := context.Background()
	conn, _, table, name := distributedRollup(t)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkFresh(t, pc, conn, table, "")

	const key = 4_242_424
	var shard int64
	var from int
	if err := conn.QueryRow(ctx, `SELECT p.shardid, p.nodeport FROM pg_dist_shard_placement p
		WHERE p.shardid = get_shard_id_for_distribution_column($1::regclass, $2::bigint)`, table, key).Scan(&shard, &from); err != nil {
		t.Fatal(err)
	}
	to := cluster.workers[0]
	if to.Port == from {
		to = cluster.workers[1]
	}
	tx := snapshotTx(t, to.URL(database))
	mustExec(t, conn, fmt.Sprintf(`SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d, shard_transfer_mode => 'block_writes')`,
		shard, from, to.Port))
	before := pendingRows(t, conn, name)
	if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES (4242424001, '2026-01-12 10:00+00', %d, 'NL', 'web', 1)`, table, key)); err != nil {
		t.Fatalf("a write in a transaction whose snapshot predates the move: %v", err)
	}
	commitLogged(t, tx, conn, name, before, 1)
	checkFresh(t, pc, conn, table, "")
}

// TestCitusSnapshotBeforeRollup: a REPEATABLE READ transaction on a worker
// takes its snapshot before rollup create makes the log and the capture
// triggers, and writes after it, eight rows of eight days whose shards are
// on that worker. The capture logs them, and the answers through the proxy
// count them. (The capture function checked that the log was distributed
// in pg_dist_partition, through the transaction's snapshot, which
// predated the log: it let the writes through unlogged.)
func TestCitusSnapshotBeforeRollup(t *testing.T) {
	ctx := context.Background()
	conn, _, table, name := distributedEvents(t)
	tx := snapshotTx(t, cluster.workers[0].URL(database))
	if r := rollupCreate(t, coordURL(), name, table); r.code != 0 {
		t.Fatalf("rollup create on a distributed table: %s", r)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkFresh(t, pc, conn, table, "")
	// Keys whose shards are on that worker: their writes run in the
	// transaction's own session there (a write Citus sends over a
	// connection gets a transaction, and a snapshot, of its own).
	rows, err := conn.Query(ctx, `SELECT k FROM generate_series(4242425, 4252424) k
		WHERE (SELECT p.nodeport FROM pg_dist_shard_placement p WHERE p.shardid = get_shard_id_for_distribution_column($1::regclass, k)) = $2
		LIMIT 8`, table, cluster.workers[0].Port)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(keys) != 8 {
		t.Fatalf("keys on worker %d: %v, %v", cluster.workers[0].Port, keys, err)
	}
	before := pendingRows(t, conn, name)
	for i, k := range keys {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES (%d, '2026-01-%02d 10:00+00', %d, 'NL', 'web', 1)`, table, 4_242_424_000+i, 11+i, k)); err != nil {
			t.Fatalf("a write in a transaction whose snapshot predates the rollup: %v", err)
		}
	}
	commitLogged(t, tx, conn, name, before, int64(len(keys)))
	checkFresh(t, pc, conn, table, "")
}

// TestCitusRenamedColumnWrites: the time column of a distributed source
// with a rollup renamed, with no refresh after it: writes issued on the
// coordinator and on each worker, in shards that never moved, succeed
// (unlogged: the coordinator sees the column changed and answers exactly).
// A review found the writes issued on a worker failing ("column
// x.created_at does not exist"): the capture function asked pg_class
// whether the shard predated the transaction's snapshot, and Citus hides
// shards from pg_class in a client's session, so the check of the columns
// it reads was skipped.
func TestCitusRenamedColumnWrites(t *testing.T) {
	ctx := context.Background()
	conn, _, table, name := distributedRollup(t)
	mustExec(t, conn, `ALTER TABLE `+table+` RENAME COLUMN created_at TO ts`)
	for i, url := range []string{coordURL(), cluster.workers[0].URL(database), cluster.workers[1].URL(database)} {
		c := connect(t, url)
		for j := int64(0); j < 16; j++ {
			id := 4_343_000_000 + int64(i)*100 + j
			if _, err := c.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, ts, user_id, country, device, amount) VALUES (%d, '2026-01-12 10:00+00', %d, 'NL', 'web', 1)`,
				table, id, 5_000_000+id%1000)); err != nil {
				t.Errorf("a write issued on %s after the time column was renamed: %v", url, err)
				break
			}
		}
		if _, err := c.Exec(ctx, fmt.Sprintf(`UPDATE %s SET amount = amount + 1 WHERE id >= %d AND id < %d`, table, 4_343_000_000+int64(i)*100, 4_343_000_000+int64(i)*100+16)); err != nil {
			t.Errorf("an update issued on %s after the time column was renamed: %v", url, err)
		}
		c.Close(ctx)
	}
	mustExec(t, conn, `ALTER TABLE `+table+` RENAME COLUMN ts TO created_at`)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkFresh(t, pc, conn, table, "since its last refresh")
	refreshRollup(t, name)
	checkFresh(t, pc, conn, table, "")
}

// TestCitusMinMax: a rollup with min and max measures on a distributed
// source is created, refreshed and answered from, right through writes
// (rollup create failed with XX000, "cannot switch local execution status":
// the refresh deleted from the reference table rollup_truncated on the
// coordinator's own placement before its read, whose aggregated arm Citus
// runs over connections).
func TestCitusMinMax(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := createEvents(t, conn, schema, true)
	name := schema + "_minmax"
	if r := rollupCreate(t, coordURL(), name, table, "--min", "amount", "--max", "amount", "--sum", "amount"); r.code != 0 {
		t.Fatalf("rollup create with min and max on a distributed table: %s", r)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	// The distinct count makes the query one the proxy answers; the other
	// columns are exact and compared.
	q := `SELECT country, min(amount), max(amount), sum(amount), count(*), count(DISTINCT user_id) FROM ` + table +
		` WHERE created_at >= '2026-01-03' AND created_at < '2026-01-20' GROUP BY country ORDER BY country`
	rowsOf := func(t *testing.T, c *pgx.Conn) string {
		t.Helper()
		rows, err := c.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(v[:len(v)-1]...))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, "\n")
	}
	check := func(t *testing.T, when string) {
		t.Helper()
		want := rowsOf(t, conn)
		pc.takeNotices()
		got := rowsOf(t, pc.Conn)
		notices := strings.Join(pc.takeNotices(), "\n")
		if got != want {
			t.Errorf("%s: through the proxy\n%s\nexactly\n%s", when, got, want)
		}
		if !strings.Contains(notices, "from rollup "+name) || strings.Contains(notices, "not used") {
			t.Errorf("%s: not answered from the rollup (notices %q)", when, notices)
		}
	}
	check(t, "after create")
	writeAll(t, coordURL(), table, 11_000_000)
	mustExec(t, conn, `UPDATE `+table+` SET amount = 99999 WHERE user_id = 42 AND created_at >= '2026-01-05' AND created_at < '2026-01-06'`)
	mustExec(t, conn, `DELETE FROM `+table+` WHERE amount = (SELECT min(amount) FROM `+table+` WHERE created_at >= '2026-01-08' AND created_at < '2026-01-09')`)
	check(t, "after writes")
	refreshRollup(t, name)
	check(t, "after a refresh")
	refreshRollup(t, name, "--full")
	check(t, "after a full refresh")
}

// TestCitusCoordinatorShards: a source with shards on the coordinator
// (shouldhaveshards) is captured, refreshed and answered from (rollup
// create failed with XX000, "cannot switch local execution status", as in
// TestCitusMinMax).
func TestCitusCoordinatorShards(t *testing.T) {
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := schema + ".events"
	mustExec(t, conn, `CREATE TABLE `+table+` (id bigint NOT NULL, created_at timestamptz NOT NULL, user_id bigint NOT NULL,
		country text, device text NOT NULL, amount numeric(10,2) NOT NULL, PRIMARY KEY (user_id, id))`)
	mustExec(t, conn, fmt.Sprintf(`SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', true)`, cluster.coord.Port))
	t.Cleanup(func() {
		mustExec(t, conn, fmt.Sprintf(`SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', false)`, cluster.coord.Port))
	})
	mustExec(t, conn, fmt.Sprintf(`SELECT create_distributed_table('%s', 'user_id', shard_count => 6, colocate_with => 'none')`, table))
	var here int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM citus_shards WHERE table_name = $1::regclass AND nodeport = $2`,
		table, cluster.coord.Port).Scan(&here); err != nil || here == 0 {
		t.Fatalf("shards of %s on the coordinator: %d, %v", table, here, err)
	}
	insertEvents(t, conn, table, 1, eventsRows)
	name := schema + "_daily"
	if r := rollupCreate(t, coordURL(), name, table); r.code != 0 {
		t.Fatalf("rollup create on a table with shards on the coordinator: %s", r)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkFresh(t, pc, conn, table, "")
	writeAll(t, coordURL(), table, 12_000_000)
	checkFresh(t, pc, conn, table, "")
	refreshRollup(t, name)
	checkFresh(t, pc, conn, table, "")

	// The log made again by hand, as a restore of the coordinator would,
	// and not distributed: writes to the coordinator's shards failed
	// ("relation is not distributed", in the capture function's lookup of
	// the log's shard).
	log := pgx.Identifier{"pgsketch", "log_" + name}.Sanitize()
	mustExec(t, conn, `DROP TABLE `+log)
	mustExec(t, conn, `CREATE TABLE `+log+` (key bigint NOT NULL, bucket timestamptz NOT NULL, consumed bigint)`)
	writeAll(t, coordURL(), table, 13_000_000)
	checkFresh(t, pc, conn, table, "is not distributed with its source")
	refreshRollup(t, name)
	checkFresh(t, pc, conn, table, "")
	writeAll(t, coordURL(), table, 14_000_000)
	checkFresh(t, pc, conn, table, "")
}

// TestCitusForgedMemo: the setting in which a shard's capture function
// remembered the distribution value and bucket it logged is a pgsketch.*
// setting any session can set; set by hand before a write on a worker, or
// as SET LOCAL that Citus sends the workers, it made the function skip the
// write's log row (the answers missed it until a full refresh). Every
// statement on a shard now logs its buckets.
func TestCitusForgedMemo(t *testing.T) {
	ctx := context.Background()
	conn, _, table, name := distributedRollup(t)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	setting := "pgsketch.logged_" + name
	var user int64
	var port int
	if err := conn.QueryRow(ctx, `SELECT u, p.nodeport FROM generate_series(990001, 990100) u,
		LATERAL get_shard_id_for_distribution_column($1::regclass, u) AS s
		JOIN pg_dist_shard_placement p ON p.shardid = s WHERE p.nodeport <> $2 LIMIT 1`, table, cluster.coord.Port).Scan(&user, &port); err != nil {
		t.Fatal(err)
	}
	w := connect(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, database))
	memo := fmt.Sprintf("%d %s", user, "1768953600.000000") // 2026-01-21
	mustExec(t, w, fmt.Sprintf(`SELECT set_config('%s', '%s', false)`, setting, memo))
	mustExec(t, w, fmt.Sprintf(`INSERT INTO %s VALUES (99000001, '2026-01-21 09:00+00', %d, 'GB', 'web', 9)`, table, user))
	inTransaction(t, conn, `SET LOCAL citus.propagate_set_commands = 'local'`,
		fmt.Sprintf(`SET LOCAL %s = '%s'`, setting, memo),
		fmt.Sprintf(`INSERT INTO %s VALUES (99000002, '2026-01-21 10:00+00', %d, 'GB', 'web', 9)`, table, user))
	checkFresh(t, pc, conn, table, "")
}

// TestCitusRedistributed: undistribute_table, a refresh, then
// create_distributed_table again into the log's co-location group. The
// log left from before passed for intact while the capture function was
// the one-node form, which logs nothing on shards: a write on a worker
// was missed by answers from the rollup. The refresh of the local table
// now drops the log, so the table distributed again is answered exactly
// until a refresh captures it.
func TestCitusRedistributed(t *testing.T) {
	conn, _, table, name := distributedRollup(t)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	unsafe := withSettings(coordURL(), "citus.enable_unsafe_triggers", "on")
	u := connect(t, unsafe)
	mustExec(t, u, `SELECT undistribute_table('`+table+`')`)
	refreshRollup(t, name)
	checkFresh(t, pc, conn, table, "")
	colocate := "default"
	if log := "pgsketch.log_" + name; relationExists(t, conn, log) {
		t.Errorf("the log of %s is still there after a refresh of the local table", name)
		colocate = log
	}
	mustExec(t, u, fmt.Sprintf(`SELECT create_distributed_table('%s', 'user_id', colocate_with => '%s')`, table, colocate))
	writeAll(t, cluster.workers[0].URL(database), table, 15_000_000)
	checkFresh(t, pc, conn, table, "not used")
	refreshRollup(t, name)
	checkFresh(t, pc, conn, table, "")
	writeAll(t, cluster.workers[0].URL(database), table, 16_000_000)
	checkFresh(t, pc, conn, table, "")
}

// TestCitusReplicaWrites: writes under session_replication_role = replica
// on a worker, and sent to the workers as SET LOCAL, are seen (the
// capture function on the shards let every replica session through
// unlogged, meaning the rows a shard move replays; now only a logical
// replication worker's).
func TestCitusReplicaWrites(t *testing.T) {
	conn, _, table, _ := distributedRollup(t)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	w := connect(t, cluster.workers[0].URL(database))
	mustExec(t, w, `SET session_replication_role = replica`)
	mustExec(t, w, `INSERT INTO `+table+` SELECT 97000000 + g, '2026-01-11 12:00+00', 970000 + g, 'DE', 'ios', 5 FROM generate_series(1, 40) g`)
	mustExec(t, w, `DELETE FROM `+table+` WHERE user_id BETWEEN 300 AND 310 AND created_at < '2026-01-04'`)
	inTransaction(t, conn, `SET LOCAL citus.propagate_set_commands = 'local'`, `SET LOCAL session_replication_role = replica`,
		`INSERT INTO `+table+` SELECT 97100000 + g, '2026-01-12 12:00+00', 971000 + g, 'FR', 'web', 5 FROM generate_series(1, 40) g`)
	checkFresh(t, pc, conn, table, "")
}

// TestCitusLogicalShardMove: a shard moved by logical replication (Citus's
// non-blocking move) while rows are written into it. The writes are
// logged where they run, the logical replication worker that replays them
// on the new placement logs nothing, the log's shard moves with the
// source's: every write is seen once, and a move with no write logs
// nothing.
func TestCitusLogicalShardMove(t *testing.T) {
	ctx := context.Background()
	// A co-location group of its own: a move takes every co-located
	// table's shard along, and Citus moves by logical replication only
	// tables with a replica identity (other tests' tables may have none).
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := createEvents(t, conn, schema, false)
	mustExec(t, conn, fmt.Sprintf(`SELECT create_distributed_table('%s', 'user_id', shard_count => %d, colocate_with => 'none')`, table, shardCount))
	name := schema + "_daily"
	if r := rollupCreate(t, coordURL(), name, table); r.code != 0 {
		t.Fatalf("rollup create: %s", r)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	move := func(t *testing.T, mode string) (shard int64) {
		t.Helper()
		var port int
		if err := conn.QueryRow(ctx, `SELECT s.shardid, p.nodeport FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)
			WHERE s.logicalrelid = $1::regclass ORDER BY s.shardid LIMIT 1`, table).Scan(&shard, &port); err != nil {
			t.Fatal(err)
		}
		to := cluster.workers[0].Port
		if to == port {
			to = cluster.workers[1].Port
		}
		mustExec(t, conn, fmt.Sprintf(`SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d, shard_transfer_mode => '%s')`,
			shard, port, to, mode))
		return shard
	}
	for _, mode := range []string{"force_logical", "auto"} {
		t.Run(mode, func(t *testing.T) {
			refreshRollup(t, name)
			move(t, mode)
			if n := pendingRows(t, conn, name); n != 0 {
				t.Errorf("%d rows in the log after a move with no write", n)
			}
			checkFresh(t, pc, conn, table, "")
		})
	}
	t.Run("writes during the move", func(t *testing.T) {
		var shard int64
		if err := conn.QueryRow(ctx, `SELECT s.shardid FROM pg_dist_shard s WHERE s.logicalrelid = $1::regclass ORDER BY s.shardid LIMIT 1`, table).Scan(&shard); err != nil {
			t.Fatal(err)
		}
		// Users whose rows land in that shard.
		rows, err := conn.Query(ctx, `SELECT u FROM generate_series(980001, 990000) u WHERE get_shard_id_for_distribution_column($1::regclass, u) = $2 LIMIT 200`, table, shard)
		if err != nil {
			t.Fatal(err)
		}
		users, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(users) == 0 {
			t.Fatalf("users of shard %d: %d, %v", shard, len(users), err)
		}
		w := connect(t, coordURL())
		stop, done := make(chan struct{}), make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				u := users[i%len(users)]
				if _, err := w.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES (%d, '2026-01-%02d 11:00+00', %d, 'PL', 'web', 3)`, table, 98000000+i, 2+i%25, u)); err != nil {
					done <- fmt.Errorf("write %d during the move: %w", i, err)
					return
				}
			}
		}()
		time.Sleep(300 * time.Millisecond)
		move(t, "force_logical")
		time.Sleep(300 * time.Millisecond)
		close(stop)
		if err := <-done; err != nil {
			t.Error(err)
		}
		checkFresh(t, pc, conn, table, "")
	})
}
