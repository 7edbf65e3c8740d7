package refresh

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/upstream"
)

// FirstSeenCheck compares what a rollup's first-seen bookkeeping holds
// below the watermark with what the source says: the new keys per bucket
// as pgsketch.first_seen answers them, and each key's first bucket.
type FirstSeenCheck struct {
	// Key is the counted column.
	Key string
	// Skipped says why nothing was compared (pgsketch.first_seen refused
	// to answer, as it does before the bookkeeping is built and while
	// changes or inserted rows are not refreshed; the proxy then answers
	// from the source), or is empty.
	Skipped string
	// Buckets is how many buckets were compared (those with new keys on
	// either side).
	Buckets int
	// Wrong lists the buckets whose counts differ.
	Wrong []FirstSeenBucket
	// WrongKeys is how many keys the key table holds in another first
	// bucket than the source's, lacks, or holds though the source has
	// no row of them before the watermark.
	WrongKeys int64
}

// FirstSeenBucket is one bucket whose answered and exact counts differ.
type FirstSeenBucket struct {
	Bucket          string
	Answered, Exact int64
}

// VerifyFirstSeen checks rollup name's first-seen bookkeeping, or returns
// nil when it keeps none. It asks pgsketch.first_seen first and, when that
// answers, recomputes every key's first bucket from the source rows before
// the watermark: a read of the whole source. It only reads, in a
// transaction of its own.
func VerifyFirstSeen(ctx context.Context, conn upstream.Session, name string) (check *FirstSeenCheck, err error) {
	defer func() { _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") }()
	r, err := beginVerify(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	if r.FirstSeen == nil {
		return nil, nil
	}
	check = &FirstSeenCheck{Key: r.FirstSeen.Key}
	if !r.Refreshed() {
		check.Skipped = "the rollup has never been refreshed"
		return check, nil
	}
	switch r.TimeType {
	case catalog.Date, catalog.Timestamp, catalog.Timestamptz:
	default:
		return nil, fmt.Errorf("verify %s: time column %s has type %q", name, r.TimeColumn, r.TimeType)
	}
	answered, err := upstream.Rows(ctx, conn, `SELECT f.bucket::text, f.users
		FROM pgsketch.first_seen($1, NULL, (SELECT d.watermark FROM pgsketch.rollup_defs d WHERE d.name = $1)) f`, r.Name)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55000" {
			check.Skipped = pe.Message
			return check, nil
		}
		return nil, fmt.Errorf("verify %s: first seen: %w", name, err)
	}
	table, err := upstream.Rows(ctx, conn, `SELECT format('pgsketch.%I', pgsketch.first_seen_table($1))`, r.Name)
	if err != nil {
		return nil, fmt.Errorf("verify %s: first seen: %w", name, err)
	}
	exact, err := upstream.Rows(ctx, conn, firstSeenExactSQL(r, string(table[0][0])), r.Name)
	if err != nil {
		return nil, fmt.Errorf("verify %s: first seen from the source: %w", name, err)
	}
	counts := map[string][2]int64{} // bucket: answered, exact
	var order []string
	add := func(bucket string, i int, n int64) {
		c, seen := counts[bucket]
		if !seen {
			order = append(order, bucket)
		}
		c[i] = n
		counts[bucket] = c
	}
	for _, row := range answered {
		n, _ := strconv.ParseInt(string(row[1]), 10, 64)
		add(string(row[0]), 0, n)
	}
	for _, row := range exact {
		n, _ := strconv.ParseInt(string(row[1]), 10, 64)
		if row[0] == nil {
			check.WrongKeys = n
			continue
		}
		add(string(row[0]), 1, n)
	}
	for _, bucket := range order {
		c := counts[bucket]
		check.Buckets++
		if c[0] != c[1] {
			check.Wrong = append(check.Wrong, FirstSeenBucket{Bucket: bucket, Answered: c[0], Exact: c[1]})
		}
	}
	return check, nil
}

// firstSeenExactSQL is the statement that recomputes, from the source
// rows whose bucket starts before r's watermark ($1 is r's name), each
// key's first bucket (rows without a time have none; the NULL key is one
// key, as GROUP BY makes it), named as the change log names buckets. It
// returns the new keys per bucket (bucket as text, count), then a row with
// a NULL bucket and the number of keys whose row in the key table
// (keys, its qualified name) differs. It writes the buckets itself rather
// than through the catalog's functions, so that it checks them too.
func firstSeenExactSQL(r *catalog.Rollup, keys string) string {
	tc := catalog.QuoteIdent(r.TimeColumn)
	return fmt.Sprintf(`
		WITH k AS (SELECT s.%[4]s AS key, min(s.%[1]s) AS t FROM %[2]s s
		            WHERE s.%[1]s IS NOT NULL
		              AND %[3]s < (SELECT d.watermark FROM pgsketch.rollup_defs d WHERE d.name = $1)
		            GROUP BY s.%[4]s),
		     e AS (SELECT k.key, %[5]s AS bucket FROM k)
		SELECT e.bucket::text, count(*) FROM e GROUP BY e.bucket
		UNION ALL
		SELECT NULL, count(*) FROM (SELECT DISTINCT x.key
		                              FROM ((SELECT e.key, e.bucket FROM e EXCEPT SELECT p.key, p.bucket FROM %[6]s p)
		                                    UNION ALL
		                                    (SELECT p.key, p.bucket FROM %[6]s p EXCEPT SELECT e.key, e.bucket FROM e)) x) y`,
		tc, r.Source.String(), logName(r, bucketOf(r, "s."+tc)), catalog.QuoteIdent(r.FirstSeen.Key),
		logName(r, bucketOf(r, "k.t")), keys)
}
