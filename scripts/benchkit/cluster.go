package benchkit

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/internal/localpg"
	"github.com/pgsketch/pgsketch/migrations"
)

// Settings are the throwaway cluster's settings every benchmark starts
// from (internal/localpg adds its test settings: fsync off and the rest).
func Settings() map[string]string {
	return map[string]string{"shared_buffers": "1GB", "max_wal_size": "8GB", "checkpoint_timeout": "30min"}
}

// Cluster starts a throwaway PostgreSQL 15 cluster with settings (in
// keep, kept after stop, when keep is not empty) and returns the URL of
// its postgres database and the function that stops it (and removes it
// unless kept).
func Cluster(ctx context.Context, keep string, settings map[string]string) (dsn string, stop func(), err error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := localpg.Start(ctx, localpg.Options{Dir: keep, Keep: keep != "", Logger: log, Settings: settings})
	if err != nil {
		return "", nil, err
	}
	return c.URL("postgres"), func() { c.Remove() }, nil
}

// Database is dsn when it is given (a database of the caller's, with a
// stop that does nothing), and otherwise a throwaway cluster's as Cluster
// starts it.
func Database(ctx context.Context, dsn, keep string, settings map[string]string) (string, func(), error) {
	if dsn != "" {
		return dsn, func() {}, nil
	}
	return Cluster(ctx, keep, settings)
}

// DB is the database a benchmark runs on and a connection to it.
type DB struct {
	DSN  string
	Conn *pgx.Conn
	stop func()
}

// Open connects to the database Database gives.
func Open(ctx context.Context, dsn, keep string, settings map[string]string) (*DB, error) {
	dsn, stop, err := Database(ctx, dsn, keep, settings)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		stop()
		return nil, err
	}
	return &DB{DSN: dsn, Conn: conn, stop: stop}, nil
}

// Close closes the connection, then stops the throwaway cluster, if any.
func (db *DB) Close() {
	db.Conn.Close(context.Background())
	db.stop()
}

// Prepare makes database dsn ready for pgsketch: the hll extension and
// the pgsketch catalog, migrated up.
func Prepare(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS hll"); err != nil {
		return fmt.Errorf("the hll extension is needed: %w", err)
	}
	m, err := migrations.Open(dsn, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Up()
}
