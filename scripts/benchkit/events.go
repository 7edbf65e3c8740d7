package benchkit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/internal/demodata"
)

// Events is internal/demodata's events table, named table: rows events
// over days days from 2026-01-01, by up to users users.
func Events(table string, rows int64, days int, users int64) demodata.Spec {
	spec := demodata.Default
	spec.Table, spec.Rows, spec.Days, spec.Users = table, rows, days, users
	return spec
}

// HasRows reports whether table holds n rows (none when it does not
// exist).
func HasRows(ctx context.Context, conn *pgx.Conn, table string, n int64) bool {
	var have int64
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&have)
	return have == n
}

// Mark is the comment a generated events table carries, which tells it
// again by what spec made it.
func Mark(spec demodata.Spec) string {
	return fmt.Sprintf("demodata rows=%d days=%d users=%d", spec.Rows, spec.Days, spec.Users)
}

// MarkSQL is the statement that gives the table Mark(spec).
func MarkSQL(spec demodata.Spec) string {
	return "COMMENT ON TABLE " + spec.Table + " IS '" + Mark(spec) + "'"
}

// Marked reports whether the table carries Mark(spec).
func Marked(ctx context.Context, conn *pgx.Conn, spec demodata.Spec) bool {
	var have string
	_ = conn.QueryRow(ctx, "SELECT coalesce(obj_description(to_regclass('"+spec.Table+"'), 'pg_class'), '')").Scan(&have)
	return have == Mark(spec)
}

// Generate says that spec's events are being generated, runs create, and
// says how long it took, which it returns.
func Generate(spec demodata.Spec, create func() error) (time.Duration, error) {
	fmt.Printf("generating %d events over %d days...\n", spec.Rows, spec.Days)
	t0 := time.Now()
	if err := create(); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	fmt.Printf("generated in %s\n", d.Round(time.Second))
	return d, nil
}

// Exec runs the statements in turn, each as one simple Query, up to the
// first that fails.
func Exec(ctx context.Context, conn *pgx.Conn, sql ...string) error {
	for _, s := range sql {
		if _, err := conn.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Strings is the values of a query of one text column.
func Strings(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Built reports whether rollup name exists and has been built.
func Built(ctx context.Context, conn *pgx.Conn, name string) bool {
	var built bool
	_ = conn.QueryRow(ctx, "SELECT watermark IS NOT NULL FROM pgsketch.rollup_defs WHERE name = $1", name).Scan(&built)
	return built
}
