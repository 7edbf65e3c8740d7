package refresh

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/pgsketch/pgsketch/catalog"
)

// tuple encodes one read_sql tuple: flag, time (µs), dims, measures.
func tuple(base bool, t int64, vals ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(2+len(vals)))
	flag := []byte{0}
	if base {
		flag[0] = 1
	}
	b = appendField(b, flag)
	b = appendField(b, binary.BigEndian.AppendUint64(nil, uint64(t)))
	for _, v := range vals {
		b = appendField(b, v)
	}
	return b
}

func int8v(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// benchEvents returns COPY data shaped like the benchmark's read of the
// internal/demodata events table (docs/benchmarks.md, rollup build): three
// days of 222,222 events each in time order (20 M over 90 days), countries
// with a long tail and NULLs, three devices, users skewed towards a heavy
// minority; lean tuples (time, country, device, user_id), or flagged ones
// with the count's NULL.
func benchEvents(flagged bool) (data []byte, rows int) {
	countries := []string{"US", "IN", "DE", "GB", "BR", "FR", "JP", "CA", "MX", "ES", "IT", "AU", "NL", "PL", "SE", "KR", "NG", "AR", "ZA", ""}
	weights := []int{30, 12, 8, 7, 6, 5, 5, 4, 3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1}
	var pick []string
	for i, w := range weights {
		for range w {
			pick = append(pick, countries[i])
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	const days, perDay = 3, 222_222
	data = appendHeader(nil)
	for i := range days * perDay {
		t := int64(i) * (days * usPerDay) / (days * perDay)
		var c []byte
		if s := pick[r.IntN(len(pick))]; s != "" {
			c = []byte(s)
		}
		d := []byte("web")
		switch u := r.Float64(); {
		case u < 0.45:
			d = []byte("android")
		case u < 0.85:
			d = []byte("ios")
		}
		u := r.Float64()
		user := int8v(int64(2_000_000 * u * u * u))
		if flagged {
			data = append(data, tuple(true, t, c, d, nil, user)...)
			continue
		}
		data = binary.BigEndian.AppendUint16(data, 4)
		for _, v := range [][]byte{binary.BigEndian.AppendUint64(nil, uint64(t)), c, d, user} {
			data = appendField(data, v)
		}
	}
	return appendTrailer(data), days * perDay
}

// BenchmarkGroupsFeed feeds a daily rollup's read by country and device
// with an HLL of user_id (see benchEvents) into new groups, in 256 KB
// pieces as a reader does: ns/row is the refresher's cost per base row,
// COPY decoding, bucketing, the group lookup, the hash and the sketch.
func BenchmarkGroupsFeed(b *testing.B) {
	for _, c := range []struct {
		name    string
		flagged bool
	}{{"lean", false}, {"flagged", true}} {
		b.Run(c.name, func(b *testing.B) {
			data, rows := benchEvents(c.flagged)
			fields, _ := parseFields([]string{"count", "hll:14:5:int8"})
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for range b.N {
				g := newGroups(2, fields, bucketer{grain: catalog.Day})
				var rest []byte
				for off := 0; off < len(data); off += 256 << 10 {
					rest = append(rest, data[off:min(off+256<<10, len(data))]...)
					n, err := g.feed(rest)
					if err != nil {
						b.Fatal(err)
					}
					rest = rest[:copy(rest, rest[n:])]
				}
				if g.rows != int64(rows) {
					b.Fatalf("%d rows, want %d", g.rows, rows)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}
