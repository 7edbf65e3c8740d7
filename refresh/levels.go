package refresh

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/upstream"
)

// LevelResult describes one level a refresh rebuilt.
type LevelResult struct {
	Grain string
	// Written is the number of level rows rebuilt.
	Written int64
	// Elapsed is the time the rebuild took (the level's share of the
	// refresh).
	Elapsed time.Duration
}

// rebuildLevels rebuilds, after the rollup's buckets in [lo, hi) (nil:
// unbounded) were written in the refresh's transaction, the level buckets
// that hold them (every bucket of a level not built yet), by merging the
// rollup's rows: pgsketch.level_begin says what to read and write.
func rebuildLevels(ctx context.Context, conn upstream.Session, name string, lo, hi any) ([]LevelResult, error) {
	rows, err := upstream.Rows(ctx, conn, `SELECT grain FROM pgsketch.rollup_levels WHERE rollup = $1 ORDER BY grain`, name)
	if err != nil {
		return nil, err
	}
	var out []LevelResult
	for _, r := range rows {
		grain := string(r[0])
		t0 := time.Now()
		n, err := rebuildLevel(ctx, conn, name, grain, lo, hi)
		if err != nil {
			return out, fmt.Errorf("%s level: %w", grain, err)
		}
		out = append(out, LevelResult{Grain: grain, Written: n, Elapsed: time.Since(t0)})
	}
	return out, nil
}

func rebuildLevel(ctx context.Context, conn upstream.Session, name, grain string, lo, hi any) (int64, error) {
	rows, err := upstream.Rows(ctx, conn, `SELECT read_sql, ndims, array_to_json(fields), write_sql, bucket_zone, time_kind, grain
		FROM pgsketch.level_begin($1, $2, $3, $4)`, name, grain, lo, hi)
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 || len(rows[0]) != 7 {
		return 0, fmt.Errorf("level_begin returned %d rows", len(rows))
	}
	row := rows[0]
	ndims, err := strconv.Atoi(string(row[1]))
	if err != nil {
		return 0, fmt.Errorf("ndims: %w", err)
	}
	var kinds []string
	if err := json.Unmarshal(row[2], &kinds); err != nil {
		return 0, fmt.Errorf("fields: %w", err)
	}
	fields, err := parseFields(kinds)
	if err != nil {
		return 0, err
	}
	g, err := catalog.ParseGrain(string(row[6]))
	if err != nil {
		return 0, err
	}
	grp := newGroups(ndims, fields, bucketer{grain: g, date: string(row[5]) == "date"})
	if err := readStream(ctx, conn, string(row[0]), grp); err != nil {
		return 0, fmt.Errorf("read rollup rows: %w", err)
	}
	if zone := row[4]; zone != nil {
		if grp.instants, err = instants(ctx, conn, grp.localBuckets(), string(zone)); err != nil {
			return 0, fmt.Errorf("bucket starts: %w", err)
		}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(grp.writeTo(pw)) }()
	n, err := conn.CopyFrom(ctx, pr, string(row[3]))
	pr.Close()
	if err != nil {
		return 0, fmt.Errorf("write level rows: %w", err)
	}
	return n, nil
}

// analyze refreshes PostgreSQL's statistics of the rollup table's bucket
// and dimension columns (not the sketches: detoasting them would cost
// more than the rest of the table) when the refresh wrote a tenth of its
// rows or the table has none: pgsketch.catalog() reads them for the
// proxy's estimate of rollup rows merged per group. Inside the refresh's
// transaction, ANALYZE sees the rows it wrote.
func analyze(ctx context.Context, conn upstream.Session, name string, written int64) error {
	rows, err := upstream.Rows(ctx, conn, `SELECT format('%I.%I', d.rollup_schema, d.rollup_table),
		(SELECT coalesce(string_agg(format(', %I', x), ''), '') FROM unnest(d.dimensions) x), c.reltuples
		FROM pgsketch.rollup_defs d JOIN pg_class c ON c.oid = to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))
		WHERE d.name = $1`, name)
	if err != nil {
		return err
	}
	if len(rows) != 1 || len(rows[0]) != 3 {
		return fmt.Errorf("rollup table not found")
	}
	reltuples, err := strconv.ParseFloat(string(rows[0][2]), 64)
	if err != nil {
		return err
	}
	if reltuples >= 0 && float64(written) < reltuples/10 {
		return nil
	}
	return conn.Exec(ctx, "ANALYZE "+string(rows[0][0])+" (bucket"+string(rows[0][1])+")")
}
