package catalog

import (
	"testing"
	"time"
)

const sample = `[{"name" : "events_daily", "source_schema" : "public", "source_table" : "events",
 "rollup_schema" : "public", "rollup_table" : "events_daily", "source_oid" : 16390, "source_rls" : false,
 "source_columns" : ["id","created_at","user_id","country","device","amount"],
 "time_column" : "created_at", "time_type" : "timestamp with time zone", "grain" : "day", "time_zone" : "UTC",
 "dimensions" : [{"column" : "country", "type" : "text"}, {"column" : "device", "type" : "text"}],
 "measures" : [{"column" : "row_count", "kind" : "count", "expression" : "*", "type" : null, "log2m" : null, "regwidth" : null, "hash" : null},
  {"column" : "distinct_user_id", "kind" : "hll", "expression" : "user_id", "type" : "bigint", "log2m" : 14, "regwidth" : 5, "hash" : "xxhash64"}],
 "watermark" : "2026-01-31T00:00:00.000000Z", "late_window_seconds" : 86400.000000, "version" : 2, "rows" : 1800}]`

func TestParse(t *testing.T) {
	s, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := s.Rollup("events_daily")
	if !ok || len(s.ForSource(Table{"public", "events"})) != 1 {
		t.Fatal("rollup not found")
	}
	if r.Grain != Day || r.TimeType != Timestamptz || r.SourceOID != 16390 || r.LateWindow != 24*time.Hour ||
		!r.Watermark.Equal(time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)) || r.Rows != 1800 || len(r.SourceColumns) != 6 {
		t.Fatalf("parsed %+v", r)
	}
	m, ok := r.Measure(HLL, "user_id")
	if !ok || m.Column != "distinct_user_id" || m.Log2m != 14 || m.StdErr() < 0.0081 || m.StdErr() > 0.0082 {
		t.Fatalf("measure %+v", m)
	}
	if _, ok := r.Dimension("device"); !ok {
		t.Fatal("dimension device missing")
	}
	for _, bad := range []string{`{`, `[{"grain":"fortnight"}]`, `[{"grain":"day","watermark":"yesterday"}]`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) succeeded", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = Parse(b) })
}
