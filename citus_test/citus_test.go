//go:build citus

package citus

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/migrations"
)

// TestCitusCluster: the cluster is what the other tests assume (two active
// workers, hll on every node, Citus 13.2.2) and pgsketch's catalog on the
// coordinator is made of plain local tables, migrated again as a no-op.
func TestCitusCluster(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, coordURL())
	var version string
	var workers int
	if err := conn.QueryRow(ctx, `SELECT citus_version(), (SELECT count(*) FROM citus_get_active_worker_nodes())`).Scan(&version, &workers); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "Citus 13.2.2 ") || workers != 2 {
		t.Fatalf("citus_version() %q, %d active workers; want Citus 13.2.2 and 2", version, workers)
	}
	for _, w := range cluster.workers {
		var hll string
		if err := connect(t, w.URL(database)).QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'hll'`).Scan(&hll); err != nil {
			t.Errorf("hll on the worker on port %d: %v", w.Port, err)
		}
	}
	var distributed int
	// Other tests may have captured a distributed source already: its log
	// is distributed with it, and pgsketch.rollup_truncated is then a
	// reference table. The catalog's own tables are not.
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_dist_partition
		WHERE logicalrelid::text LIKE 'pgsketch.%' AND logicalrelid::text NOT LIKE 'pgsketch.log\_%'
		  AND logicalrelid <> 'pgsketch.rollup_truncated'::regclass`).Scan(&distributed); err != nil {
		t.Fatal(err)
	}
	if distributed != 0 {
		t.Errorf("%d catalog tables are in Citus's metadata; want plain local tables", distributed)
	}
	r := cli(t, "migrate", "up", "--dsn", coordURL())
	want := fmt.Sprintf("catalog version %d of %d (clean)", migrations.Latest(), migrations.Latest())
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("migrate up again: %s; want %q", r, want)
	}
}

// TestCitusLocalSource: a plain table on the coordinator of a Citus
// cluster is a source like on a single PostgreSQL: rollup create builds
// the rollup, the proxy answers distinct counts from it within its stated
// error, writes are captured (answers stay within the error after them),
// rollup verify passes and rollup drop removes rollup and triggers.
func TestCitusLocalSource(t *testing.T) {
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := createEvents(t, conn, schema, false)
	name := schema + "_daily"
	if r := rollupCreate(t, coordURL(), name, table); r.code != 0 {
		t.Fatalf("rollup create on a local table: %s", r)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkAnswers(t, pc, conn, table, approxAnswer, "")

	writeAll(t, coordURL(), table, 10_000_000)
	checkAnswers(t, pc, conn, table, approxAnswer, "")
	if r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
		t.Fatalf("rollup refresh: %s", r)
	}
	if r := cli(t, "rollup", "verify", name, "--buckets", "40", "--dsn", coordURL()); r.code != 0 {
		t.Errorf("rollup verify: %s", r)
	}
	checkAnswers(t, pc, conn, table, approxAnswer, "")
	if r := cli(t, "rollup", "drop", name, "--dsn", coordURL()); r.code != 0 {
		t.Fatalf("rollup drop: %s", r)
	}
	if tg := captureTriggers(t, name); len(tg) != 0 {
		t.Errorf("capture triggers left after rollup drop: %q", tg)
	}
	checkAnswers(t, pc, conn, table, exactAnswer, "")
}

// TestCitusDistributedSource: on a table distributed by Citus by hash
// (by user_id, 32 shards) with no rollup, the proxy passes distinct counts
// through, exact, APPROX_COUNT_DISTINCT counted exactly with a NOTICE, and
// under Citus's own citus.count_distinct_error_rate the same answers as
// directly. rollup create then works in sessions with
// citus.enable_unsafe_triggers off and on (pgsketch sets what it needs);
// writes of every kind keep working in sessions with the setting off and
// on, and are seen through the proxy with no refresh. A reference table,
// whose changes pgsketch does not capture, is refused cleanly (SQLSTATE
// 0A000, saying why; nothing defined, no trigger on any node).
func TestCitusDistributedSource(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := createEvents(t, conn, schema, true)
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())

	t.Run("proxy/no rollup", func(t *testing.T) {
		checkAnswers(t, pc, conn, table, exactAnswer, "")
		// APPROX_COUNT_DISTINCT with no rollup to answer it: counted
		// exactly, saying so.
		var exact, got int64
		if err := conn.QueryRow(ctx, "SELECT count(DISTINCT user_id) FROM "+table).Scan(&exact); err != nil {
			t.Fatal(err)
		}
		pc.takeNotices()
		err := pc.QueryRow(ctx, "SELECT approx_count_distinct(user_id) FROM "+table, pgx.QueryExecModeSimpleProtocol).Scan(&got)
		if n := pc.takeNotices(); err != nil || got != exact || !strings.Contains(strings.Join(n, "\n"), "counted exactly") {
			t.Errorf("APPROX_COUNT_DISTINCT through the proxy: %d (%v), exactly %d, notices %q", got, err, exact, n)
		}
	})
	t.Run("proxy/count_distinct_error_rate", func(t *testing.T) {
		// Citus's own approximation of COUNT(DISTINCT), which the proxy
		// passes through unchanged: the same answer as directly.
		direct := connect(t, withSettings(coordURL(), "citus.count_distinct_error_rate", "0.005"))
		viaProxy := connectNotices(t, withSettings(p.url(), "citus.count_distinct_error_rate", "0.005"))
		for _, q := range distinctQueries(table) {
			want, got := keyedCounts(t, direct, q), keyedCounts(t, viaProxy.Conn, q)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s with citus.count_distinct_error_rate 0.005: %v through the proxy, %v directly", q, got, want)
			}
		}
		all := distinctQueries(table)[0]
		if approx, exact := keyedCounts(t, direct, all)["all"], keyedCounts(t, conn, all)["all"]; approx == exact {
			t.Logf("citus.count_distinct_error_rate 0.005 gave the exact count %v", exact)
		} else {
			t.Logf("citus.count_distinct_error_rate 0.005: %v, exactly %v", approx, exact)
		}
	})

	t.Run("reference table", func(t *testing.T) {
		ref := schema + ".ref_events"
		mustExec(t, conn, `CREATE TABLE `+ref+` (LIKE `+table+`)`)
		mustExec(t, conn, `SELECT create_reference_table('`+ref+`')`)
		mustExec(t, conn, `INSERT INTO `+ref+` SELECT * FROM `+table+` WHERE id <= 1000`)
		name := schema + "_ref"
		r := rollupCreate(t, coordURL(), name, ref)
		if r.code != 1 || !strings.Contains(r.stderr, "SQLSTATE 0A000") || !strings.Contains(r.stderr, "other than by hash") {
			t.Errorf("rollup create on a reference table: %s; want a refusal with SQLSTATE 0A000 saying it is not distributed by hash", r)
		}
		if rollupExists(t, conn, name) {
			t.Errorf("rollup %s is defined after its create was refused", name)
		}
		if tg := captureTriggers(t, name); len(tg) != 0 {
			t.Errorf("capture triggers after the refused create: %q", tg)
		}
		if _, err := conn.Exec(ctx, `DELETE FROM `+ref+` WHERE id <= 10`); err != nil {
			t.Errorf("write to the reference table: %v", err)
		}
	})

	for i, unsafe := range []string{"off", "on"} {
		dsn := withSettings(coordURL(), "citus.enable_unsafe_triggers", unsafe)
		name := fmt.Sprintf("%s_unsafe_%s", schema, unsafe)
		t.Run("create/unsafe_triggers="+unsafe, func(t *testing.T) {
			if r := rollupCreate(t, dsn, name, table); r.code != 0 {
				t.Fatalf("rollup create on a distributed table: %s", r)
			}
			for _, session := range []string{"off", "on"} {
				t.Run("writes/session="+session, func(t *testing.T) {
					base := int64(10_000_000 * (1 + 2*i))
					if session == "on" {
						base += 10_000_000
					}
					writeAll(t, withSettings(coordURL(), "citus.enable_unsafe_triggers", session), table, base)
					checkFresh(t, pc, conn, table, "")
				})
			}
			if r := cli(t, "rollup", "drop", name, "--dsn", coordURL()); r.code != 0 || rollupExists(t, conn, name) {
				t.Errorf("rollup drop: %s", r)
			}
		})
	}
	checkAnswers(t, pc, conn, table, exactAnswer, "")
}

// TestCitusDistributeCapturedTable: a table with a rollup, and so capture
// triggers, is then distributed. Without citus.enable_unsafe_triggers
// Citus refuses; the table stays local and the rollup keeps working. With
// it, Citus distributes the table, triggers included: copying the rows
// into the shards fires the triggers' copies on the workers, which must
// let the rows through. Then writes must still succeed (pgsketch's
// triggers never fail a write), the proxy must answer exactly (the
// rollup's capture, made for a local table, no longer sees the changes)
// and rollup list say why, and rollup verify must not call the rollup
// good after writes it did not see. rollup refresh then captures the
// distributed table and rebuilds the rollup: answers come from it again,
// every write after seen; and rollup drop must remove the triggers, their
// function and the log from every node.
func TestCitusDistributeCapturedTable(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := createEvents(t, conn, schema, false)
	name := schema + "_daily"
	if r := rollupCreate(t, coordURL(), name, table); r.code != 0 {
		t.Fatalf("rollup create on a local table: %s", r)
	}
	if tg := captureTriggers(t, name); len(tg) != 4 {
		t.Fatalf("capture triggers after rollup create: %q, want 4 on %s", tg, table)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	distribute := fmt.Sprintf(`SELECT create_distributed_table('%s', 'user_id', shard_count => %d)`, table, shardCount)

	t.Run("unsafe_triggers=off", func(t *testing.T) {
		_, err := conn.Exec(ctx, distribute)
		t.Logf("create_distributed_table with capture triggers: %v", err)
		if err == nil {
			t.Fatalf("create_distributed_table distributed a table with triggers with citus.enable_unsafe_triggers off")
		}
		writeAll(t, coordURL(), table, 10_000_000)
		checkAnswers(t, pc, conn, table, approxAnswer, "")
	})

	t.Run("unsafe_triggers=on", func(t *testing.T) {
		mustExec(t, conn, "SET citus.enable_unsafe_triggers = on")
		defer mustExec(t, conn, "RESET citus.enable_unsafe_triggers")
		if _, err := conn.Exec(ctx, distribute); err != nil {
			t.Fatalf("create_distributed_table with citus.enable_unsafe_triggers on: %v (SQLSTATE %s)", err, sqlstate(err))
		}
		mustExec(t, conn, fmt.Sprintf(`SELECT truncate_local_data_after_distributing_table('%s')`, table))
		t.Logf("capture triggers after distributing: %q", captureTriggers(t, name))
		for _, session := range []string{"off", "on"} {
			t.Run("writes/session="+session, func(t *testing.T) {
				base := int64(30_000_000)
				if session == "on" {
					base = 40_000_000
				}
				writeAll(t, withSettings(coordURL(), "citus.enable_unsafe_triggers", session), table, base)
			})
		}
		t.Run("proxy", func(t *testing.T) {
			// The proxy's catalog says the capture is not in place, so
			// the rewriter passes the queries through (the reason is in
			// its log and on the status page, not in a NOTICE: a NOTICE
			// comes only from the answering statement's own check, when
			// the catalog the proxy holds predates the change).
			checkAnswers(t, pc, conn, table, exactAnswer, "")
			r := cli(t, "rollup", "list", "--dsn", coordURL())
			if r.code != 0 || !strings.Contains(r.stdout, "not captured: its change log pgsketch.log_"+name+" is missing: "+table+" was distributed by Citus since its last refresh") {
				t.Errorf("rollup list: %s; want %s reported not captured, distributed by Citus since its last refresh", r, name)
			}
		})
		t.Run("verify", func(t *testing.T) {
			// The writes above put 71 rows into the 2026-01-10 buckets
			// twice, which the rollup did not see: a check of every
			// bucket must not pass.
			r := cli(t, "rollup", "verify", name, "--buckets", "40", "--dsn", coordURL())
			if r.code == 0 {
				t.Errorf("rollup verify passed a rollup that missed writes: %s", r)
			}
		})
		t.Run("refresh", func(t *testing.T) {
			r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn")
			if r.code != 0 {
				t.Fatalf("rollup refresh of the distributed table: %s", r)
			}
			if r := cli(t, "rollup", "verify", name, "--buckets", "40", "--dsn", coordURL()); r.code != 0 {
				t.Errorf("rollup verify after the refresh: %s", r)
			}
			checkFresh(t, pc, conn, table, "")
			writeAll(t, coordURL(), table, 45_000_000)
			checkFresh(t, pc, conn, table, "")
		})
		t.Run("drop", func(t *testing.T) {
			r := cli(t, "rollup", "drop", name, "--dsn", coordURL())
			if r.code != 0 || rollupExists(t, conn, name) {
				t.Errorf("rollup drop: %s", r)
			}
			if tg := captureTriggers(t, name); len(tg) != 0 {
				t.Errorf("capture triggers left after rollup drop: %q", tg)
			}
			if fn := captureFunctions(t, name); len(fn) != 0 {
				t.Errorf("capture functions left after rollup drop: %q", fn)
			}
			if relationExists(t, conn, "pgsketch.log_"+name) {
				t.Errorf("the log of %s exists after rollup drop", name)
			}
			writeAll(t, coordURL(), table, 50_000_000)
			checkAnswers(t, pc, conn, table, exactAnswer, "")
		})
	})
}

// TestCitusDistributeEmptyCapturedTable: an empty table with a rollup (and
// so capture triggers) is distributed with citus.enable_unsafe_triggers
// on, which Citus allows, triggers included: it copies them onto every
// shard (and the TRUNCATE trigger onto the workers' shells). Every write
// to it must still succeed (pgsketch's triggers never fail a write; before
// catalog version 12 every one failed on the workers), in sessions with
// the setting off and on, TRUNCATE too; the proxy must answer exactly;
// rollup refresh then captures the distributed table, and the writes after
// it are seen through the proxy; rollup drop, without any setting, must
// remove the triggers from the coordinator's table, the workers' shells
// and every shard, and the trigger function from every node, and writes
// must work after it.
func TestCitusDistributeEmptyCapturedTable(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := schema + ".events"
	mustExec(t, conn, `CREATE TABLE `+table+` (
		id         bigint NOT NULL,
		created_at timestamptz NOT NULL,
		user_id    bigint NOT NULL,
		country    text,
		device     text NOT NULL,
		amount     numeric(10,2) NOT NULL,
		PRIMARY KEY (user_id, id))`)
	name := schema + "_daily"
	if r := rollupCreate(t, coordURL(), name, table); r.code != 0 {
		t.Fatalf("rollup create on an empty local table: %s", r)
	}
	mustExec(t, conn, "SET citus.enable_unsafe_triggers = on")
	_, err := conn.Exec(ctx, fmt.Sprintf(`SELECT create_distributed_table('%s', 'user_id', shard_count => %d)`, table, shardCount))
	mustExec(t, conn, "RESET citus.enable_unsafe_triggers")
	if err != nil {
		t.Fatalf("create_distributed_table of an empty table with capture triggers, unsafe triggers on: %v", err)
	}
	t.Logf("capture triggers after distributing: %q", captureTriggers(t, name))
	for _, session := range []string{"off", "on"} {
		t.Run("writes/session="+session, func(t *testing.T) {
			base := int64(10_000_000)
			if session == "on" {
				base = 20_000_000
			}
			writeAll(t, withSettings(coordURL(), "citus.enable_unsafe_triggers", session), table, base)
		})
	}
	t.Run("truncate", func(t *testing.T) {
		// Citus truncates every shard, whose copy of the TRUNCATE
		// trigger fires on the worker.
		mustExec(t, conn, "TRUNCATE "+table)
		writeAll(t, coordURL(), table, 25_000_000)
	})
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	t.Run("proxy", func(t *testing.T) {
		// The rollup holds no bucket (it was built from no rows), so the
		// proxy does not consider it and says nothing: exact answers.
		checkAnswers(t, pc, conn, table, exactAnswer, "")
	})
	t.Run("refresh", func(t *testing.T) {
		if r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
			t.Fatalf("rollup refresh of the distributed table: %s", r)
		}
		insertEvents(t, conn, table, 1, eventsRows)
		checkFresh(t, pc, conn, table, "")
		if r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
			t.Fatalf("rollup refresh: %s", r)
		}
		writeAll(t, coordURL(), table, 35_000_000)
		checkFresh(t, pc, conn, table, "")
	})
	t.Run("drop", func(t *testing.T) {
		r := cli(t, "rollup", "drop", name, "--dsn", coordURL())
		if r.code != 0 || rollupExists(t, conn, name) {
			t.Errorf("rollup drop: %s", r)
			// What a user can do then, for the record: the same with
			// Citus's unsafe triggers allowed.
			r = cli(t, "rollup", "drop", name, "--dsn", withSettings(coordURL(), "citus.enable_unsafe_triggers", "on"))
			t.Logf("rollup drop with citus.enable_unsafe_triggers on: exit %d", r.code)
		}
		if tg := captureTriggers(t, name); len(tg) != 0 {
			t.Errorf("%d capture triggers left after rollup drop: %q ...", len(tg), tg[:1])
		}
		if fn := captureFunctions(t, name); len(fn) != 0 {
			t.Errorf("capture functions left after rollup drop: %q", fn)
		}
		writeAll(t, coordURL(), table, 30_000_000)
		checkAnswers(t, pc, conn, table, exactAnswer, "")
	})
}

// TestCitusDistributedRollupTable: pgsketch keeps rollup tables local on
// the coordinator. Distributing one (docs/citus.md §1: by a dimension,
// device, not co-located) is refused by Citus, for the row-level security
// policy every rollup table carries (its check of the source's privileges
// is a subquery, which Citus does not take on a distributed table, and no
// form it takes could keep the check: it runs on the workers). The table
// stays local and the rollup works as on one node: built, answered within
// its error, refreshed after writes, verified. A role reads it only while
// it may read the source, checked at once after a REVOKE, directly and
// through the proxy; a role that never could, never. Distributed anyway,
// its policy dropped by hand, the rollup is refused by rollup refresh
// (SQLSTATE 0A000, saying to keep it local) and answered exactly, saying
// why; rollup drop removes it.
func TestCitusDistributedRollupTable(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, coordURL())
	schema := newSchema(t, conn)
	table := createEvents(t, conn, schema, false)
	reader, stranger := schema+"_reader", schema+"_stranger"
	for _, role := range []string{reader, stranger} {
		mustExec(t, conn, fmt.Sprintf("CREATE ROLE %s LOGIN; GRANT USAGE ON SCHEMA %s TO %s", role, schema, role))
		t.Cleanup(func() {
			c := connect(t, coordURL())
			if _, err := c.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", role)); err != nil {
				t.Logf("drop role %s: %v", role, err)
			}
		})
	}
	mustExec(t, conn, fmt.Sprintf("GRANT SELECT ON %s TO %s", table, reader))
	name := schema + "_daily"
	if r := rollupCreate(t, coordURL(), name, table, "--no-build"); r.code != 0 {
		t.Fatalf("rollup create --no-build: %s", r)
	}
	var rollupTable string
	if err := conn.QueryRow(ctx, `SELECT format('%I.%I', rollup_schema, rollup_table) FROM pgsketch.rollup_defs WHERE name = $1`, name).Scan(&rollupTable); err != nil {
		t.Fatal(err)
	}
	distribute := fmt.Sprintf(`SELECT create_distributed_table('%s', 'device', colocate_with => 'none')`, rollupTable)
	_, err := conn.Exec(ctx, distribute)
	t.Logf("create_distributed_table of the rollup table: %v", err)
	if sqlstate(err) != "0A000" || !strings.Contains(err.Error(), "policy") {
		t.Fatalf("create_distributed_table of the rollup table: %v; want Citus's refusal of its policy, SQLSTATE 0A000", err)
	}
	var distributed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = $1::regclass)`, rollupTable).Scan(&distributed); err != nil || distributed {
		t.Fatalf("rollup table %s in Citus's metadata after the refusal: %v (%v)", rollupTable, distributed, err)
	}

	if r := cli(t, "rollup", "refresh", name, "--full", "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
		t.Fatalf("rollup refresh --full: %s", r)
	}
	p := startProxy(t, "--approx", "on")
	pc := connectNotices(t, p.url())
	checkAnswers(t, pc, conn, table, approxAnswer, "")
	writeAll(t, coordURL(), table, 10_000_000)
	checkAnswers(t, pc, conn, table, approxAnswer, "")
	if r := cli(t, "rollup", "refresh", name, "--dsn", coordURL(), "--log-level", "warn"); r.code != 0 {
		t.Fatalf("incremental rollup refresh: %s", r)
	}
	checkAnswers(t, pc, conn, table, approxAnswer, "")
	if r := cli(t, "rollup", "verify", name, "--buckets", "40", "--dsn", coordURL()); r.code != 0 {
		t.Errorf("rollup verify: %s", r)
	}

	// refused: reading the rollup table directly and every distinct query
	// through the proxy fail with SQLSTATE 42501 for role.
	refused := func(t *testing.T, role, why string) {
		t.Helper()
		direct := connect(t, asUser(coordURL(), role))
		var n int64
		err := direct.QueryRow(ctx, "SELECT count(*) FROM "+rollupTable).Scan(&n)
		if sqlstate(err) != "42501" {
			t.Errorf("%s, %s reading %s directly: %d rows, %v; want SQLSTATE 42501", why, role, rollupTable, n, err)
		}
		viaProxy := connectNotices(t, asUser(p.url(), role))
		for _, q := range distinctQueries(table) {
			rows, err := viaProxy.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
			if err == nil {
				for rows.Next() {
				}
				err = rows.Err()
			}
			if sqlstate(err) != "42501" {
				t.Errorf("%s, %s through the proxy: %s: %v; want SQLSTATE 42501", why, role, q, err)
			}
		}
	}
	t.Run("privileges", func(t *testing.T) {
		direct := connect(t, asUser(coordURL(), reader))
		var n int64
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM "+rollupTable).Scan(&n); err != nil || n == 0 {
			t.Fatalf("%s, with SELECT on the source, reading %s: %d rows, %v", reader, rollupTable, n, err)
		}
		checkAnswers(t, connectNotices(t, asUser(p.url(), reader)), direct, table, approxAnswer, "")
		refused(t, stranger, "without any right on the source")
		// At once, not at the next refresh.
		mustExec(t, conn, fmt.Sprintf("REVOKE SELECT ON %s FROM %s", table, reader))
		refused(t, reader, "after REVOKE SELECT on the source")
	})

	t.Run("distributed by hand", func(t *testing.T) {
		mustExec(t, conn, "DROP POLICY pgsketch_source_readers ON "+rollupTable)
		mustExec(t, conn, distribute)
		r := cli(t, "rollup", "refresh", name, "--dsn", coordURL())
		if r.code != 1 || !strings.Contains(r.stderr, "SQLSTATE 0A000") || !strings.Contains(r.stderr, "keeps rollup tables local") {
			t.Errorf("rollup refresh of a distributed rollup table: %s; want a refusal with SQLSTATE 0A000", r)
		}
		// The proxy's catalog predates the distribution (nothing it
		// fingerprints changed), so the answering statement's own check
		// refuses the rollup, saying why.
		checkAnswers(t, pc, conn, table, exactAnswer, "distributed by Citus")
		r = cli(t, "rollup", "list", "--dsn", coordURL())
		if r.code != 0 || !strings.Contains(r.stdout, "its table "+rollupTable+" is distributed by Citus") {
			t.Errorf("rollup list: %s; want %s reported distributed by Citus", r, name)
		}
		viaProxy := connectNotices(t, asUser(p.url(), reader))
		for _, q := range distinctQueries(table) {
			rows, err := viaProxy.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
			if err == nil {
				for rows.Next() {
				}
				err = rows.Err()
			}
			if sqlstate(err) != "42501" {
				t.Errorf("%s through the proxy: %s: %v; want SQLSTATE 42501", reader, q, err)
			}
		}
	})

	if r := cli(t, "rollup", "drop", name, "--dsn", coordURL()); r.code != 0 || relationExists(t, conn, rollupTable) {
		t.Errorf("rollup drop: %s", r)
	}
	if tg := captureTriggers(t, name); len(tg) != 0 {
		t.Errorf("capture triggers left after rollup drop: %q", tg)
	}
	checkAnswers(t, pc, conn, table, exactAnswer, "")
}
