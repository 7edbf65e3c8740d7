package e2e

import (
	"context"
	"testing"

	"github.com/pgsketch/pgsketch/refresh"
)

// TestRollupSumsMatchPostgres: the sums the refresher adds (smallint,
// integer, bigint and numeric columns) are PostgreSQL's sum() of each
// bucket, as text: the same value, type and display scale, NaN and the
// infinities included, NULL for a bucket without values; read by one
// stream and by three.
func TestRollupSumsMatchPostgres(t *testing.T) {
	t.Parallel()
	_, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE m (t timestamptz NOT NULL, i2 smallint, i4 integer, i8 bigint, n numeric);
		INSERT INTO m SELECT timestamptz '2026-01-01' + i * interval '7 minutes',
		       CASE WHEN i % 5 = 0 THEN NULL ELSE (i % 30000)::smallint END,
		       (i * 7919) % 2000000000 - 1000000000,
		       CASE WHEN i % 3 = 0 THEN 9223372036854775807 - i ELSE -i END,
		       CASE WHEN i % 11 = 0 THEN NULL
		            WHEN i % 7 = 0 THEN round((i / 7.0)::numeric, (i % 5))
		            ELSE (i::numeric / 1000) END
		  FROM generate_series(1, 30000) i;
		-- A day without values, one with NaN, one with both infinities, one with +Infinity.
		UPDATE m SET i2 = NULL, i4 = NULL, i8 = NULL, n = NULL WHERE t >= '2026-01-03' AND t < '2026-01-04';
		UPDATE m SET n = 'NaN' WHERE t = (SELECT min(t) FROM m WHERE t >= '2026-01-05');
		UPDATE m SET n = 'Infinity' WHERE t = (SELECT min(t) FROM m WHERE t >= '2026-01-07');
		UPDATE m SET n = '-Infinity' WHERE t = (SELECT max(t) FROM m WHERE t < '2026-01-08');
		UPDATE m SET n = 'Infinity' WHERE t = (SELECT min(t) FROM m WHERE t >= '2026-01-09')`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('m_daily', 'm', 't', sum_columns => '{i2,i4,i8,n}')`)
	for _, streams := range []int{1, 3} {
		refreshRollup(t, conn, "m_daily", refresh.Options{Full: true, Streams: streams})
		var bad, total int
		err := conn.QueryRow(context.Background(), `
			WITH exact AS (SELECT date_trunc('day', t, 'UTC') AS bucket, sum(i2) AS s2, sum(i4) AS s4, sum(i8) AS s8, sum(n) AS sn
			                 FROM m GROUP BY 1)
			SELECT count(*) FILTER (WHERE r.bucket IS NULL OR e.bucket IS NULL
			         OR (e.s2::text, pg_typeof(e.s2), e.s4::text, pg_typeof(e.s4), e.s8::text, pg_typeof(e.s8), e.sn::text)
			            IS DISTINCT FROM (r.sum_i2::text, pg_typeof(r.sum_i2), r.sum_i4::text, pg_typeof(r.sum_i4), r.sum_i8::text, pg_typeof(r.sum_i8), r.sum_n::text)),
			       count(*)
			  FROM exact e FULL JOIN m_daily r ON r.bucket = e.bucket`).Scan(&bad, &total)
		if err != nil {
			t.Fatal(err)
		}
		if bad != 0 || total < 20 {
			t.Errorf("%d streams: %d of %d buckets differ from PostgreSQL's sums", streams, bad, total)
		}
	}
}
