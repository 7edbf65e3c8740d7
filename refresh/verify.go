package refresh

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// Check compares one rollup row's sketch estimate with the exact distinct
// count recomputed from the base table.
type Check struct {
	// Key is the row's bucket and dimension values, as PostgreSQL prints
	// them, tab separated.
	Key     string
	Measure string
	Exact   int64
	// Estimate is the sketch's estimate; StdErrs the error in standard
	// errors of the estimate (1.04/√m · exact), 0 when exact is 0.
	Estimate float64
	StdErrs  float64
	// RowCount and ExactRows are the stored and the recomputed row count.
	RowCount, ExactRows int64
}

// Verify recomputes up to buckets materialized buckets of rollup name
// (those the change log does not list; any bucket when its change capture
// is not in place, as the log then says nothing of which buckets changed)
// exactly from the base table (spread evenly over the rollup's range) and
// returns one Check per rollup row and sketch measure in them. It only
// reads, in a transaction of its own, and does not take the refresh lock:
// run it when no refresh is running, or it may report rows of buckets that
// a refresh is rebuilding.
func Verify(ctx context.Context, conn upstream.Session, name string, buckets int) (checks []Check, err error) {
	defer func() { _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") }()
	r, err := beginVerify(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	if !r.Refreshed() {
		return nil, fmt.Errorf("verify %s: the rollup has never been refreshed", name)
	}
	bucketList, err := pickBuckets(ctx, conn, r, buckets, r.CaptureBroken == "")
	if err != nil {
		return nil, fmt.Errorf("verify %s: pick buckets: %w", name, err)
	}
	if len(bucketList) == 0 {
		return nil, nil
	}
	q, hlls, err := recomputeSQL(r, bucketList)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", name, err)
	}
	rows, err := upstream.Rows(ctx, conn, q)
	if err != nil {
		return nil, fmt.Errorf("verify %s: recompute: %w", name, err)
	}
	for _, row := range rows {
		stored, _ := strconv.ParseInt(string(row[1]), 10, 64)
		exactRows, _ := strconv.ParseInt(string(row[2]), 10, 64)
		for i, m := range hlls {
			raw, exactText := row[3+2*i], row[4+2*i]
			exact, _ := strconv.ParseInt(string(exactText), 10, 64)
			c := Check{Key: string(row[0]), Measure: m.Column, Exact: exact, RowCount: stored, ExactRows: exactRows}
			b, err := decodeHexBytea(raw)
			if err == nil {
				c.Estimate, err = estimate(m.Aggregate, b)
			}
			if err != nil {
				return nil, fmt.Errorf("verify %s: row %s: %s: %w", name, c.Key, m.Column, err)
			}
			if exact > 0 {
				c.StdErrs = (c.Estimate - float64(exact)) / (m.StdErr() * float64(exact))
			}
			checks = append(checks, c)
		}
	}
	return checks, nil
}

// beginVerify opens a verification's read-only transaction, in which
// everything it reads shares one snapshot (the caller rolls it back), and
// returns rollup name as the catalog has it.
func beginVerify(ctx context.Context, conn upstream.Session, name string) (*catalog.Rollup, error) {
	var b strings.Builder
	b.WriteString("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	setLocal(&b)
	if err := conn.Exec(ctx, b.String()); err != nil {
		return nil, fmt.Errorf("verify %s: %w", name, err)
	}
	rows, err := upstream.Rows(ctx, conn, catalog.Query)
	if err != nil {
		return nil, fmt.Errorf("verify %s: read catalog: %w", name, err)
	}
	snap, err := catalog.Parse(rows[0][0])
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", name, err)
	}
	r, ok := snap.Rollup(name)
	if !ok {
		return nil, fmt.Errorf("verify %s: no such rollup", name)
	}
	return r, nil
}

// pickBuckets picks up to n evenly spread materialized buckets of r, but
// for those the change log lists or that hold inserted rows when
// skipLogged: they are stale by design until a refresh, and queries read
// them from the base table or add the inserted rows. It returns
// them as SQL literals.
func pickBuckets(ctx context.Context, conn upstream.Session, r *catalog.Rollup, n int, skipLogged bool) ([]string, error) {
	logged := logName(r, "bucket")
	where := logged + " NOT IN (SELECT l.bucket FROM pgsketch.rollup_dirty l WHERE l.rollup = $2)"
	if r.Inserts != nil {
		// Buckets that gained rows since they were built: queries add
		// those rows to the rollup rows.
		where += " AND " + logged + " NOT IN (SELECT i.pgsketch_bucket FROM " + r.Inserts.String() + " i)"
	}
	if r.Distributed {
		// Buckets the capture on the source's shards logged.
		where += " AND " + logged + " NOT IN (SELECT s.bucket FROM pgsketch.shard_logged($2) AS s(bucket))"
	}
	if !skipLogged {
		where = "$2::text IS NOT NULL"
	}
	rows, err := upstream.Rows(ctx, conn, fmt.Sprintf(`
		WITH b AS (SELECT DISTINCT bucket FROM %s WHERE %s),
		     n AS (SELECT bucket, row_number() OVER (ORDER BY bucket) AS i, count(*) OVER () AS c FROM b)
		SELECT bucket FROM n WHERE c <= $1::int OR (i - 1) %% ceil(c::numeric / $1::int)::int = 0 ORDER BY bucket`,
		r.Table.String(), where), strconv.Itoa(n), r.Name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, row := range rows {
		out = append(out, catalog.QuoteLiteral(string(row[0])))
	}
	return out, nil
}

// recomputeSQL is the statement that recomputes the picked buckets from
// the base table beside the stored rows: per row, its key as text, the
// stored and the exact row count, then each sketch and its exact distinct
// count (hlls, in order: the HLL and Theta measures).
func recomputeSQL(r *catalog.Rollup, bucketList []string) (string, []catalog.Measure, error) {
	bucketType := map[catalog.TimeType]string{catalog.Date: "date", catalog.Timestamp: "timestamp",
		catalog.Timestamptz: "timestamptz"}[r.TimeType]
	if bucketType == "" {
		return "", nil, fmt.Errorf("time column %s has type %q", r.TimeColumn, r.TimeType)
	}
	bucketExpr := bucketOf(r, catalog.QuoteIdent(r.TimeColumn))
	var dims, joinOn []string
	for _, d := range r.Dimensions {
		q := catalog.QuoteIdent(d.Column)
		dims = append(dims, q)
		joinOn = append(joinOn, fmt.Sprintf("r.%s IS NOT DISTINCT FROM e.%s", q, q))
	}
	var hlls []catalog.Measure
	var exactCols, rollCols []string
	for _, m := range r.Measures {
		if m.Aggregate == catalog.HLL || m.Aggregate == catalog.Theta {
			hlls = append(hlls, m)
			exactCols = append(exactCols, fmt.Sprintf("count(DISTINCT %s) AS %s", catalog.QuoteIdent(m.Expression), catalog.QuoteIdent("x_"+m.Column)))
			rollCols = append(rollCols, fmt.Sprintf("r.%s, e.%s", catalog.QuoteIdent(m.Column), catalog.QuoteIdent("x_"+m.Column)))
		}
	}
	if len(hlls) == 0 {
		return "", nil, errors.New("the rollup has no sketches")
	}
	keyCols := append([]string{"bucket"}, dims...)
	keyText := make([]string, len(keyCols))
	for i, k := range keyCols {
		keyText[i] = fmt.Sprintf("coalesce(r.%s::text, 'NULL')", k)
	}
	q := fmt.Sprintf(`
		WITH e AS (SELECT %s AS bucket%s, count(*) AS x_rows, %s FROM %s
		            WHERE %s IN (%s) GROUP BY 1%s)
		SELECT concat_ws(E'\t', %s), r.row_count, e.x_rows, %s
		  FROM %s r JOIN e ON r.bucket = e.bucket%s
		 WHERE r.bucket IN (%s) ORDER BY 1`,
		bucketExpr, prefixComma(dims), strings.Join(exactCols, ", "), r.Source.String(),
		bucketExpr, strings.Join(withType(bucketList, bucketType), ", "), groupPositions(len(dims)),
		strings.Join(keyText, ", "), strings.Join(rollCols, ", "),
		r.Table.String(), prefixAnd(joinOn),
		strings.Join(withType(bucketList, bucketType), ", "))
	return q, hlls, nil
}

// bucketOf is the SQL of the start of r's bucket holding time t (an
// expression of the time column's type), in that type.
func bucketOf(r *catalog.Rollup, t string) string {
	switch r.TimeType {
	case catalog.Timestamptz:
		return fmt.Sprintf("date_trunc(%s, %s, %s)", catalog.QuoteLiteral(string(r.Grain)), t, catalog.QuoteLiteral(r.TimeZone))
	case catalog.Timestamp:
		return fmt.Sprintf("date_trunc(%s, %s)", catalog.QuoteLiteral(string(r.Grain)), t)
	default:
		return fmt.Sprintf("date_trunc(%s, %s::timestamp)::date", catalog.QuoteLiteral(string(r.Grain)), t)
	}
}

// logName is bucket start b (of the time column's type) as the change log
// names buckets: an instant, for date and timestamp columns the wall-clock
// start read as UTC.
func logName(r *catalog.Rollup, b string) string {
	if r.TimeType == catalog.Timestamptz {
		return b
	}
	return "(" + b + "::timestamp AT TIME ZONE 'UTC')"
}

// estimate is the distinct count a stored sketch of kind k estimates.
func estimate(k catalog.Aggregate, b []byte) (float64, error) {
	if k == catalog.Theta {
		var c sketch.CompactTheta
		if err := c.UnmarshalBinary(b); err != nil {
			return 0, err
		}
		return c.Estimate(), nil
	}
	var h sketch.HLL
	if err := h.UnmarshalBinary(b); err != nil {
		return 0, err
	}
	return h.Estimate(), nil
}

// Summary condenses checks: how many, the largest error in standard
// errors, the share within 3, and rows whose row count differs.
type Summary struct {
	Checks      int
	MaxStdErrs  float64
	Within3     float64
	Beyond5     int
	CountErrors int
}

// Summarize computes the Summary of checks.
func Summarize(checks []Check) Summary {
	s := Summary{Checks: len(checks)}
	within := 0
	for _, c := range checks {
		a := math.Abs(c.StdErrs)
		s.MaxStdErrs = math.Max(s.MaxStdErrs, a)
		if a <= 3 {
			within++
		}
		if a > 5 {
			s.Beyond5++
		}
		if c.RowCount != c.ExactRows {
			s.CountErrors++
		}
	}
	if len(checks) > 0 {
		s.Within3 = float64(within) / float64(len(checks))
	}
	return s
}

func decodeHexBytea(b []byte) ([]byte, error) {
	s, ok := strings.CutPrefix(string(b), `\x`)
	if !ok {
		return nil, fmt.Errorf("bytea %.10q is not in hex format", b)
	}
	out, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("bytea: %w", err)
	}
	return out, nil
}

func withType(lits []string, typ string) []string {
	out := make([]string, len(lits))
	for i, l := range lits {
		out[i] = l + "::" + typ
	}
	return out
}

func prefixComma(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ", " + strings.Join(xs, ", ")
}

func prefixAnd(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return " AND " + strings.Join(xs, " AND ")
}

func groupPositions(ndims int) string {
	var b strings.Builder
	for i := 0; i < ndims; i++ {
		fmt.Fprintf(&b, ", %d", i+2)
	}
	return b.String()
}
