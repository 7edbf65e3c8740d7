package refresh

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/pgsketch/pgsketch/catalog"
)

func TestHashInt(t *testing.T) {
	check := func(n int64) {
		t.Helper()
		if got, want := hashInt(n), xxhash.Sum64String(strconv.FormatInt(n, 10)); got != want {
			t.Fatalf("hashInt(%d) = %#x, want %#x", n, got, want)
		}
	}
	for _, n := range []int64{0, 1, -1, 9, 10, -10, 99, 100, -100, 999, 1000, math.MaxInt64, math.MinInt64,
		math.MaxInt64 - 1, math.MinInt64 + 1, math.MaxInt32, math.MinInt32, math.MaxInt16, math.MinInt16} {
		check(n)
	}
	p := int64(1)
	for range 18 {
		p *= 10
		check(p - 1)
		check(p)
		check(-p)
		check(-p + 1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		check(int64(r.Uint64()) >> r.IntN(64))
	}
}

func TestDimIndex(t *testing.T) {
	var x dimIndex
	r := rand.New(rand.NewPCG(5, 6))
	seen := map[string]int{}
	var keys []string
	for i := range 5000 {
		var k string
		if i > 0 && r.IntN(3) == 0 {
			k = keys[r.IntN(len(keys))]
		} else {
			b := make([]byte, r.IntN(40))
			for j := range b {
				b[j] = byte(r.IntN(3)) // few distinct bytes: keys differ in few places
			}
			k = string(b)
		}
		id := x.id([]byte(k))
		if want, ok := seen[k]; ok && id != want {
			t.Fatalf("key %q: id %d, then %d", k, want, id)
		} else if !ok {
			if id != len(seen) {
				t.Fatalf("new key %q: id %d, want %d", k, id, len(seen))
			}
			seen[k] = id
			keys = append(keys, k)
		}
	}
}

// TestFeedFastMatchesGeneral feeds random COPY data, with partials rows,
// NULLs, every value form, dates and timestamps, cut at random points, once
// through feedFast and once through the general path only: the rollup rows
// must be the same bytes.
func TestFeedFastMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 60 {
		date := trial%3 == 0
		lean := trial%2 == 1 // base rows without the flag and the other measures; no partials rows
		kinds := []string{"count", "hll:10:5:int8", "hll:11:4:text", "hll:12:5:int4", "hll:9:5:int2", "sum"}
		if lean {
			kinds = kinds[:5]
		}
		fields, err := parseFields(kinds)
		if err != nil {
			t.Fatal(err)
		}
		grain := []catalog.Grain{catalog.Hour, catalog.Day, catalog.Week, catalog.Month}[r.IntN(4)]
		if date && grain == catalog.Hour {
			grain = catalog.Day
		}
		bk := bucketer{grain: grain, date: date}
		data := appendHeader(nil)
		ndays := 1 + r.IntN(40)
		users := 1 + r.IntN(5000)
		rows := r.IntN(30000)
		countries := [][]byte{[]byte("US"), []byte("DE"), nil, []byte(""), []byte("a much longer country name")}
		devices := [][]byte{[]byte("ios"), []byte("android"), []byte("web")}
		timeOf := func(d int) []byte {
			if date {
				return binary.BigEndian.AppendUint32(nil, uint32(int32(d)))
			}
			return binary.BigEndian.AppendUint64(nil, uint64(int64(d)*usPerDay+r.Int64N(usPerDay)))
		}
		for i := range rows {
			d := i * ndays / max(rows, 1)
			if r.IntN(20) == 0 {
				d = r.IntN(ndays) // out of order
			}
			if r.IntN(5000) == 0 {
				d = math.MaxInt32 // infinity
			}
			u := r.IntN(users) - users/4
			vals := [][]byte{nil, int8v(int64(u)), []byte("u" + strconv.Itoa(u)),
				binary.BigEndian.AppendUint32(nil, uint32(int32(u*7))), binary.BigEndian.AppendUint16(nil, uint16(int16(u))), nil}
			for j := 1; j <= 4; j++ {
				if r.IntN(30) == 0 {
					vals[j] = nil
				}
			}
			dims := [][]byte{countries[r.IntN(len(countries))], devices[r.IntN(3)]}
			if lean {
				tup := binary.BigEndian.AppendUint16(nil, uint16(1+2+4))
				for _, v := range append(append([][]byte{timeOf(d)}, dims...), vals[1:5]...) {
					tup = appendField(tup, v)
				}
				data = append(data, tup...)
				continue
			}
			data = append(data, tupleT(true, timeOf(d), append(dims, vals...)...)...)
		}
		// One partials row per group seen (the sum), at the end.
		probe := newGroups(2, fields, bk)
		probe.fast = false
		if _, err := probe.feed(appendTrailer(slices.Clone(data))); err != nil {
			t.Fatal(err)
		}
		for k := range probe.m {
			if lean {
				break
			}
			start := int64(binary.BigEndian.Uint64([]byte(k[:8])))
			var tm []byte
			if date {
				tm = binary.BigEndian.AppendUint32(nil, uint32(int32(start)))
			} else {
				tm = binary.BigEndian.AppendUint64(nil, uint64(start))
			}
			var dims [][]byte
			var rd copyReader
			rd.headerDone = true
			_, f, _, _ := rd.next(append(binary.BigEndian.AppendUint16(nil, 2), k[8:]...))
			dims = append(dims, f...)
			data = append(data, tupleT(false, tm, append(dims, int8v(3), nil, nil, nil, nil, []byte("7"))...)...)
		}
		data = appendTrailer(data)

		var outs [2][]byte
		for pass, fast := range []bool{false, true} {
			g := newGroups(2, fields, bk)
			g.fast = fast
			var rest []byte
			for i := 0; i < len(data); {
				n := 1 + r.IntN(4096)
				if r.IntN(4) == 0 {
					n = 1 + r.IntN(60)
				}
				rest = append(rest, data[i:min(i+n, len(data))]...)
				i += n
				used, err := g.feed(rest)
				if err != nil {
					t.Fatal(err)
				}
				rest = rest[used:]
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes left", len(rest))
			}
			var out bytes.Buffer
			if err := g.writeTo(&out); err != nil {
				t.Fatal(err)
			}
			outs[pass] = out.Bytes()
			if g.rows != int64(rows) {
				t.Fatalf("fast %t: %d rows, want %d", fast, g.rows, rows)
			}
		}
		if !bytes.Equal(outs[0], outs[1]) {
			t.Fatalf("trial %d (date %t, grain %s, %d rows): fast path wrote different rollup rows", trial, date, grain, rows)
		}
	}
}

// tupleT encodes one read_sql tuple with the time as given.
func tupleT(base bool, tm []byte, vals ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(2+len(vals)))
	flag := []byte{0}
	if base {
		flag[0] = 1
	}
	b = appendField(b, flag)
	b = appendField(b, tm)
	for _, v := range vals {
		b = appendField(b, v)
	}
	return b
}

// FuzzFeedFast checks that feedFast changes nothing: the same errors, the
// same rollup rows as the general path, for arbitrary data.
func FuzzFeedFast(f *testing.F) {
	seed := appendHeader(nil)
	seed = append(seed, tuple(true, 0, []byte("US"), nil, int8v(5), []byte("x"))...)
	seed = append(seed, tuple(true, 1, nil, nil, int8v(-5), nil)...)
	seed = append(seed, tuple(false, 0, []byte("US"), int8v(1), nil, nil)...)
	f.Add(appendTrailer(seed), uint8(7))
	lean := appendHeader(nil)
	for range 3 {
		lean = binary.BigEndian.AppendUint16(lean, 4)
		for _, v := range [][]byte{int8v(0), []byte("US"), int8v(5), nil} {
			lean = appendField(lean, v)
		}
	}
	f.Add(appendTrailer(lean), uint8(200))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		fields, _ := parseFields([]string{"count", "hll:4:5:int8", "hll:4:5:text"})
		var res [2]string
		for pass, fast := range []bool{false, true} {
			g := newGroups(1, fields, bucketer{grain: catalog.Day})
			g.fast = fast
			var out bytes.Buffer
			var rest []byte
			var err error
			step := int(cut) + 1
			for i := 0; i < len(data) && err == nil; i += step {
				rest = append(rest, data[i:min(i+step, len(data))]...)
				var n int
				n, err = g.feed(rest)
				rest = rest[n:]
			}
			if err == nil {
				err = g.writeTo(&out)
			}
			res[pass] = strconv.Itoa(len(rest)) + " " + strconv.FormatInt(g.tuples.Load(), 10) + " " + out.String()
			if err != nil {
				res[pass] += " " + err.Error()
			}
		}
		if res[0] != res[1] {
			t.Fatalf("general %q\nfast    %q", res[0], res[1])
		}
	})
}
