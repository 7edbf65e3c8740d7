package rewrite

import (
	"sort"
	"testing"
	"time"
)

// BenchmarkRewrite plans every golden case (prefilter, caps, parse, match,
// SQL generation) and reports the median time per query over the corpus as
// median-ns/query, beside the mean that ns/op gives.
func BenchmarkRewrite(b *testing.B) {
	snap := testCatalog()
	type q struct {
		sql  string
		sess Session
	}
	var qs []q
	for _, file := range goldenFiles(b) {
		cases, _ := readGolden(b, file)
		for _, c := range cases {
			qs = append(qs, q{c.sql, c.session(b)})
		}
	}
	per := make([][]time.Duration, len(qs))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, x := range qs {
			t0 := time.Now()
			Rewrite(x.sql, snap, x.sess)
			per[j] = append(per[j], time.Since(t0))
		}
	}
	b.StopTimer()
	// The median over queries of each query's median time.
	meds := make([]time.Duration, len(qs))
	for j, ds := range per {
		sort.Slice(ds, func(a, c int) bool { return ds[a] < ds[c] })
		meds[j] = ds[len(ds)/2]
	}
	sort.Slice(meds, func(a, c int) bool { return meds[a] < meds[c] })
	b.ReportMetric(float64(meds[len(meds)/2].Nanoseconds()), "median-ns/query")
	b.ReportMetric(float64(meds[len(meds)*9/10].Nanoseconds()), "p90-ns/query")
	b.ReportMetric(float64(len(qs)), "queries")
}

// BenchmarkRewriteRejected is a query the prefilter turns away.
func BenchmarkRewriteRejected(b *testing.B) {
	snap := testCatalog()
	sess := Session{TimeZone: "UTC", Approx: true}
	sql := "SELECT id, name, email, created_at FROM users WHERE id = $1 AND deleted_at IS NULL ORDER BY created_at DESC LIMIT 1"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Rewrite(sql, snap, sess)
	}
}
