package refresh

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
)

func day(s string) int64 {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return (t.Unix() - pgEpochUnix) * 1_000_000
}

func TestBucketer(t *testing.T) {
	for _, c := range []struct {
		grain    catalog.Grain
		in, want string
	}{
		{catalog.Hour, "2026-03-29 02:30", "2026-03-29 02:00"},
		{catalog.Day, "2026-03-29 23:59", "2026-03-29 00:00"},
		{catalog.Day, "1999-12-31 23:59", "1999-12-31 00:00"},
		{catalog.Week, "2026-01-01 12:00", "2025-12-29 00:00"}, // a Thursday; ISO week from Monday
		{catalog.Week, "2026-01-05 00:00", "2026-01-05 00:00"}, // a Monday
		{catalog.Week, "2000-01-01 00:00", "1999-12-27 00:00"},
		{catalog.Month, "2024-02-29 13:00", "2024-02-01 00:00"},
		{catalog.Month, "1970-01-01 00:00", "1970-01-01 00:00"},
		{catalog.Month, "1969-12-31 23:00", "1969-12-01 00:00"},
	} {
		b := bucketer{grain: c.grain}
		if got := b.micros(day(c.in)); got != day(c.want) {
			got, _ := localText(got)
			t.Errorf("%s of %s = %s, want %s", c.grain, c.in, got, c.want)
		}
		if c.grain != catalog.Hour {
			db := bucketer{grain: c.grain, date: true}
			if got, want := db.dateDays(int32(day(c.in)/usPerDay)), int32(day(c.want)/usPerDay); c.in[11:] == "00:00" && got != want {
				t.Errorf("date %s of %s = %d, want %d", c.grain, c.in, got, want)
			}
		}
	}
	for _, inf := range []int64{math.MaxInt64, math.MinInt64} {
		if got := (bucketer{grain: catalog.Month}).micros(inf); got != inf {
			t.Errorf("infinity moved to %d", got)
		}
	}
}

func TestGroupsFeed(t *testing.T) {
	fields, err := parseFields([]string{"count", "hll:10:5:text", "sum"})
	if err != nil {
		t.Fatal(err)
	}
	g := newGroups(1, fields, bucketer{grain: catalog.Day})
	data := appendHeader(nil)
	t0 := day("2026-01-01 10:00")
	data = append(data, tuple(true, t0, []byte("US"), nil, []byte("a"), nil)...)
	data = append(data, tuple(true, t0+usPerHour, []byte("US"), nil, []byte("b"), nil)...)
	data = append(data, tuple(true, t0+2*usPerHour, []byte("US"), nil, nil, nil)...)
	data = append(data, tuple(false, day("2026-01-01 00:00"), []byte("US"), int8v(3), nil, []byte("sum"))...)
	data = appendTrailer(data)
	// Fed in pieces, as the pipeline may cut it.
	var rest []byte
	for i := 0; i < len(data); i += 7 {
		rest = append(rest, data[i:min(i+7, len(data))]...)
		n, err := g.feed(rest)
		if err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if len(rest) != 0 || g.tuples.Load() != 4 || g.rows != 3 || len(g.m) != 1 {
		t.Fatalf("rest %d, tuples %d, rows %d, groups %d", len(rest), g.tuples.Load(), g.rows, len(g.m))
	}
	var out bytes.Buffer
	if err := g.writeTo(&out); err != nil {
		t.Fatal(err)
	}
	var rd copyReader
	b := out.Bytes()
	var rows [][][]byte
	for len(b) > 0 {
		n, f, need, err := rd.next(b)
		if err != nil || need {
			t.Fatalf("output: %v (need %v)", err, need)
		}
		if f != nil {
			rows = append(rows, append([][]byte(nil), f...))
		}
		b = b[n:]
	}
	if len(rows) != 1 || len(rows[0]) != 5 {
		t.Fatalf("output rows %v", rows)
	}
	r := rows[0]
	if int64(binary.BigEndian.Uint64(r[0])) != day("2026-01-01 00:00") || string(r[1]) != "US" ||
		int64(binary.BigEndian.Uint64(r[2])) != 3 || string(r[4]) != "sum" || r[3][0]>>4 != 1 || r[3][0]&0xf != 2 {
		t.Fatalf("output row %q", r)
	}
	// A bucket without its partials row cannot write its sum.
	bad := newGroups(1, fields, bucketer{grain: catalog.Day})
	bad.rd.headerDone = true
	if _, err := bad.feed(tuple(true, t0, nil, nil, []byte("a"), nil)); err != nil {
		t.Fatal(err)
	}
	if err := bad.writeTo(&bytes.Buffer{}); err == nil {
		t.Fatal("a group without its partials row wrote a sum")
	}
	partials := tuple(false, t0, []byte("US"), int8v(1), nil, []byte("x"))
	for _, c := range []struct {
		data []byte
		bad  bool
	}{
		{tuple(true, t0, []byte("US")), true},                                 // too few fields
		{append(partials, partials...), true},                                 // second partials row
		{append(tuple(true, t0, []byte("US"), nil, nil, nil)[:10], 0), false}, // cut short: waits for more
		{[]byte("\x00\x06\xff\xff\xff\xfe"), true},                            // a negative field length
	} {
		g := newGroups(1, fields, bucketer{grain: catalog.Day})
		g.rd.headerDone = true
		n, err := g.feed(c.data)
		if (err != nil) != c.bad {
			t.Errorf("tuple %q: used %d, err %v", c.data, n, err)
		}
	}
}

// FuzzGroups feeds arbitrary bytes as COPY BINARY data: errors are fine,
// panics are not.
func FuzzGroups(f *testing.F) {
	seed := appendHeader(nil)
	seed = append(seed, tuple(true, 0, []byte("US"), nil, []byte("a"), nil)...)
	seed = append(seed, tuple(false, 0, []byte("US"), int8v(1), nil, []byte("1"))...)
	f.Add(appendTrailer(seed))
	f.Add([]byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, _ := parseFields([]string{"count", "hll:4:1:int4", "sum"})
		g := newGroups(1, fields, bucketer{grain: catalog.Week})
		if _, err := g.feed(data); err == nil {
			_ = g.writeTo(&bytes.Buffer{})
		}
	})
}
