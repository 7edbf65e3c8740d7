// Package e2e holds pgsketch's end-to-end tests: real PostgreSQL with the hll
// extension, real clients, the real pgsketch-proxy binary.
//
// The harness in this file gives every test a fresh database on one server
// per test binary. The server is, in order of preference:
//
//  1. PGSKETCH_TEST_DSN, a superuser (or CREATEDB) connection string to a
//     server that has the hll extension available;
//  2. a container from testcontainers-go's postgres module, built from
//     testdata/Dockerfile, when a Docker engine answers;
//  3. a throwaway cluster made with the local initdb/pg_ctl (internal/localpg),
//     removed at the end even when the test binary crashes.
//
// With none of these the tests fail, saying what to install; they never skip.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/pgsketch/pgsketch/internal/localpg"
)

// server is the PostgreSQL all tests in this binary share.
var server struct {
	kind     string // "dsn", "docker" or "local"
	adminURL string // superuser connection to a maintenance database
	template string // database every test database is copied from
	prefix   string // names of databases this binary creates
	local    *localpg.Cluster
}

var dbCounter atomic.Int64

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := runTests(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e harness:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runTests(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	stop, err := startServer(ctx)
	cancel()
	if err != nil {
		return 1, err
	}
	defer stop()
	server.prefix = fmt.Sprintf("pgsketch_test_%d", os.Getpid())
	server.template = server.prefix + "_template"
	if err := makeTemplate(); err != nil {
		return 1, err
	}
	defer dropDatabase(server.template)
	return m.Run(), nil
}

func startServer(ctx context.Context) (stop func(), err error) {
	if dsn := os.Getenv("PGSKETCH_TEST_DSN"); dsn != "" {
		server.kind, server.adminURL = "dsn", dsn
		return func() {}, nil
	}
	if dockerAnswers() {
		return startContainer(ctx)
	}
	c, err := localpg.Start(ctx, localpg.Options{})
	if err != nil {
		return nil, fmt.Errorf("no PGSKETCH_TEST_DSN, no Docker engine, and no local cluster: %w", err)
	}
	server.kind, server.adminURL, server.local = "local", c.URL("postgres"), c
	return func() {
		if err := c.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e harness: remove cluster:", err)
		}
	}, nil
}

func startContainer(ctx context.Context) (func(), error) {
	dir, err := filepath.Abs("testdata")
	if err != nil {
		return nil, err
	}
	ctr, err := tcpostgres.Run(ctx, "",
		testcontainers.WithDockerfile(testcontainers.FromDockerfile{Context: dir, KeepImage: true}),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		if ctr != nil {
			testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("start PostgreSQL container: %w", err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	server.kind, server.adminURL = "docker", dsn
	return func() { testcontainers.TerminateContainer(ctr) }, nil
}

// dockerAnswers reports whether a Docker engine replies to a ping within a
// second, on DOCKER_HOST or the default socket.
func dockerAnswers() bool {
	network, addr := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		if err != nil {
			return false
		}
		switch u.Scheme {
		case "unix":
			addr = u.Path
		case "tcp":
			network, addr = "tcp", u.Host
		default:
			return false
		}
	}
	client := http.Client{
		Timeout: time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
	}
	resp, err := client.Get("http://docker/_ping")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, server.adminURL)
	if err != nil {
		return fmt.Errorf("connect to the %s server: %w", server.kind, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func makeTemplate() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tmpl := pgx.Identifier{server.template}.Sanitize()
	if err := adminExec(ctx, "DROP DATABASE IF EXISTS "+tmpl+" WITH (FORCE)"); err != nil {
		return err
	}
	if err := adminExec(ctx, "CREATE DATABASE "+tmpl); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	conn, err := pgx.Connect(ctx, localpg.WithDatabase(server.adminURL, server.template))
	if err != nil {
		return fmt.Errorf("connect to template database: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION hll"); err != nil {
		return fmt.Errorf("CREATE EXTENSION hll on the %s server (%s): %w", server.kind, localpg.InstallHint, err)
	}
	return nil
}

func dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// testDB is a database of its own for one test, with the hll extension
// created, dropped when the test ends.
type testDB struct {
	Name string
	DSN  string
}

func newTestDB(t *testing.T) *testDB {
	t.Helper()
	name := fmt.Sprintf("%s_%d", server.prefix, dbCounter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+
		" TEMPLATE "+pgx.Identifier{server.template}.Sanitize())
	if err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(name); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return &testDB{Name: name, DSN: localpg.WithDatabase(server.adminURL, name)}
}

// Conn opens a connection to the database, closed when the test ends.
func (db *testDB) Conn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect to %s: %v", db.Name, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// mustExec runs sql (no arguments, simple protocol) and fails the test on error.
func mustExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(sql), err)
	}
}

// dropRoleAtEnd drops role, and what it owns in the database at dsn, when
// the test ends.
func dropRoleAtEnd(t *testing.T, dsn, role string) {
	t.Helper()
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, role)); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
}
