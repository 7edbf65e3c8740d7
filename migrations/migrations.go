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
	migratesource "github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

//go:embed *.sql
var files embed.FS

// Table is where golang-migrate records the applied version.
const Table = "pgsketch_schema_migrations"

// Migrator applies the embedded migrations to one database.
type Migrator struct {
	db  *sql.DB
	m   *migrate.Migrate
	src migratesource.Driver
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
	return &Migrator{db: db, m: m, src: src}, nil
}

// Up applies every migration not yet applied. Being up to date is not an error.
func (mg *Migrator) Up() error {
	for {
		done, err := mg.step(+1)
		if err != nil {
			return fmt.Errorf("migrations: up: %w", err)
		}
		if done {
			return nil
		}
	}
}

// Down reverts the last n applied migrations; n < 0 reverts all of them.
// Having nothing to revert is not an error.
func (mg *Migrator) Down(n int) error {
	for i := 0; n < 0 || i < n; i++ {
		done, err := mg.step(-1)
		if err != nil {
			return fmt.Errorf("migrations: down: %w", err)
		}
		if done {
			return nil
		}
	}
	return nil
}

// step applies one migration up (+1) or reverts one (-1); done reports
// that there was none to apply. Each migration file runs as one statement
// string, so in one implicit transaction (none holds transaction control):
// one that fails, such as a down migration refused because rollups still
// use what it would remove, changes nothing. golang-migrate has then
// marked its target version dirty; step puts back the version the failed
// migration started from, clean, so that the next attempt (after dropping
// those rollups, say) needs no manual force. A version dirty for another
// reason is left alone.
func (mg *Migrator) step(dir int) (done bool, err error) {
	if v, dirty, err := mg.Version(); err != nil {
		return false, err
	} else if dirty {
		return false, fmt.Errorf("version %d is dirty: a migration failed half-way outside this program; inspect the schema, then force the version", v)
	}
	err = mg.m.Steps(dir)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, migrate.ErrNoChange) || isNoMigration(err):
		return true, nil
	}
	target, dirty, verr := mg.Version()
	if verr != nil || !dirty {
		return false, err
	}
	from, ferr := mg.startOf(dir, target)
	if ferr == nil {
		ferr = mg.m.Force(from)
	}
	if ferr != nil {
		return false, errors.Join(err, fmt.Errorf("putting back the version before the failed migration: %w", ferr))
	}
	return false, err
}

// startOf is the version a migration in direction dir to target started
// from, as Force takes it (-1 for none): the one before target going up,
// the one after it going down.
func (mg *Migrator) startOf(dir int, target uint) (int, error) {
	if dir > 0 {
		prev, err := mg.src.Prev(target)
		if errors.Is(err, fs.ErrNotExist) {
			return -1, nil
		}
		return int(prev), err
	}
	next, err := mg.src.Next(target)
	return int(next), err
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
