//go:build citus

// Package citus holds pgsketch's end-to-end tests against a Citus cluster: a
// coordinator and two workers, three throwaway PostgreSQL 15 clusters made
// with the local initdb/pg_ctl (internal/localpg), each preloading Citus
// 13.2.2 and with the hll extension, and the real pgsketch-proxy binary.
//
// The files carry the build tag citus: plain go test ./... never builds
// them. make test-citus installs Citus (scripts/citus.sh) and runs them with
// -tags citus; without Citus installed they fail, saying how to install it.
// They never skip.
//
// One cluster serves the whole test binary; every test works in a schema of
// its own in the database citus_e2e, whose pgsketch catalog is migrated
// once.
package citus

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/internal/localpg"
)

// database is the database the suite uses on every node.
const database = "citus_e2e"

// installHint says how to get Citus.
const installHint = "install Citus 13.2.2 for PostgreSQL 15 with scripts/citus.sh " +
	"(as root; make test-citus runs it), which builds it from the vendored source " +
	"(PGSKETCH_CITUS_TARBALL)"

// cluster is the Citus cluster all tests in this binary share.
var cluster struct {
	coord   *localpg.Cluster
	workers []*localpg.Cluster
	bin     string // the pgsketch-proxy binary
}

var schemaCounter atomic.Int64

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "citus harness:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	if err := citusInstalled(); err != nil {
		return 1, err
	}
	binDir, err := os.MkdirTemp("", "pgsketch-citus-bin-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(binDir)
	cluster.bin = filepath.Join(binDir, "pgsketch-proxy")
	if out, err := exec.Command("go", "build", "-o", cluster.bin, "../cmd/pgsketch-proxy").CombinedOutput(); err != nil {
		return 1, fmt.Errorf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stop, err := startCluster(ctx)
	if err != nil {
		return 1, err
	}
	defer stop()
	if out, err := exec.CommandContext(ctx, cluster.bin, "migrate", "up", "--dsn", coordURL(), "--log-level", "warn").CombinedOutput(); err != nil {
		return 1, fmt.Errorf("pgsketch-proxy migrate up on the coordinator: %v\n%s", err, out)
	}
	return m.Run(), nil
}

// citusInstalled checks that PostgreSQL's library and extension directories
// hold Citus.
func citusInstalled() error {
	bin, err := localpg.FindBinDir()
	if err != nil {
		return err
	}
	pgConfig := filepath.Join(bin, "pg_config")
	if _, err := os.Stat(pgConfig); err != nil {
		pgConfig = "pg_config"
	}
	dir := func(flag string) (string, error) {
		out, err := exec.Command(pgConfig, flag).Output()
		if err != nil {
			return "", fmt.Errorf("%s %s: %v", pgConfig, flag, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	lib, err := dir("--pkglibdir")
	if err != nil {
		return err
	}
	share, err := dir("--sharedir")
	if err != nil {
		return err
	}
	for _, f := range []string{filepath.Join(lib, "citus.so"), filepath.Join(share, "extension", "citus.control")} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("Citus is not installed for the PostgreSQL in %s (no %s): %s", bin, f, installHint)
		}
	}
	return nil
}

// startCluster starts the coordinator and two workers, creates the
// database with the citus extension on each, registers the nodes and
// creates hll on the coordinator, which Citus propagates to the workers.
func startCluster(ctx context.Context) (stop func(), err error) {
	settings := map[string]string{
		"shared_preload_libraries": "citus",
		// Citus commits multi-shard writes with two-phase commit.
		"max_prepared_transactions": "100",
		// Shard moves by logical replication (TestCitusLogicalShardMove).
		"wal_level": "logical",
	}
	nodes := make([]*localpg.Cluster, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = localpg.Start(ctx, localpg.Options{Settings: settings})
		}()
	}
	wg.Wait()
	stop = func() {
		for _, n := range nodes {
			if n != nil {
				if err := n.Remove(); err != nil {
					fmt.Fprintln(os.Stderr, "citus harness: remove cluster:", err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, fmt.Errorf("start the nodes: %w", err)
	}
	cluster.coord, cluster.workers = nodes[0], nodes[1:]
	for _, n := range nodes {
		if err := execOn(ctx, n.URL("postgres"), "CREATE DATABASE "+database); err != nil {
			stop()
			return nil, err
		}
		if err := execOn(ctx, n.URL(database), "CREATE EXTENSION citus"); err != nil {
			stop()
			return nil, fmt.Errorf("CREATE EXTENSION citus on port %d (%s): %w", n.Port, installHint, err)
		}
	}
	setup := []string{fmt.Sprintf("SELECT citus_set_coordinator_host('127.0.0.1', %d)", cluster.coord.Port)}
	for _, w := range cluster.workers {
		setup = append(setup, fmt.Sprintf("SELECT citus_add_node('127.0.0.1', %d)", w.Port))
	}
	setup = append(setup, "CREATE EXTENSION hll")
	for _, s := range setup {
		if err := execOn(ctx, coordURL(), s); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

func execOn(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// coordURL is the suite's database on the coordinator, as the superuser.
func coordURL() string { return cluster.coord.URL(database) }

// connect opens a connection to url, closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// mustExec runs sql (no arguments) and fails the test on error.
func mustExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(sql), err)
	}
}

// newSchema creates a schema of the test's own on the coordinator (Citus
// creates it on the workers too) and returns its name.
func newSchema(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	s := fmt.Sprintf("t%d", schemaCounter.Add(1))
	mustExec(t, conn, "CREATE SCHEMA "+s)
	return s
}

// asUser returns url with its user set to user (the suite's clusters
// trust every local connection).
func asUser(rawURL, user string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	u.User = url.User(user)
	return u.String()
}

// withSettings returns url with the server settings kv (name, value, ...)
// sent at connection start.
func withSettings(url string, kv ...string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		url += "&" + kv[i] + "=" + kv[i+1]
	}
	return url
}
