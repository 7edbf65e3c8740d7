package migrations

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

//go:embed *.sql
var files embed.FS

// Table is where golang-migrate records the applied version.
const Table = "pgsketch_schema_migrations"

// Migrator applies the embedded migrations to one database.
type Migrator struct {
	db *sql.DB
	m  *migrate.Migrate
}

// Open connects to dsn (a postgres:// URL or key=value string).
func Open(dsn string, log *slog.Logger) (*Migrator, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("migrations: open database: %w", err)
	}
	drv, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{MigrationsTable: Table})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	exp, err := source()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrations: expand embedded files: %w", err)
	}
	src, err := iofs.New(exp, ".")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrations: read embedded files: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrations: %w", err)
	}
	if log != nil {
		m.Log = logger{log}
	}
	return &Migrator{db: db, m: m}, nil
}

// Up applies every migration not yet applied. Being up to date is not an error.
func (mg *Migrator) Up() error {
	if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Down reverts the last n applied migrations; n < 0 reverts all of them.
// Having nothing to revert is not an error.
func (mg *Migrator) Down(n int) error {
	var err error
	if n < 0 {
		err = mg.m.Down()
	} else {
		err = mg.m.Steps(-n)
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) && !isNoMigration(err) {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Version returns the applied version (0 when none) and whether the last
// migration failed half-way (dirty), which needs a person to look.
func (mg *Migrator) Version() (version uint, dirty bool, err error) {
	v, d, err := mg.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("migrations: version: %w", err)
	}
	return v, d, nil
}

// Close releases the connection.
func (mg *Migrator) Close() error {
	serr, derr := mg.m.Close()
	return errors.Join(serr, derr, mg.db.Close())
}

// Latest is the highest version among the embedded migrations.
func Latest() uint {
	var latest uint
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		var v uint
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

func isNoMigration(err error) bool {
	var short migrate.ErrShortLimit
	return errors.As(err, &short) || errors.Is(err, fs.ErrNotExist)
}

type logger struct{ l *slog.Logger }

func (l logger) Printf(format string, v ...any) {
	l.l.Info(strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "migrate")
}
func (l logger) Verbose() bool { return false }
