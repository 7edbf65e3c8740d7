package refresh

import (
	"encoding/binary"
	"testing"

	"github.com/pgsketch/pgsketch/aggregates/catalog"
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

// BenchmarkGroupsFeed feeds tuples shaped like a daily rollup's by country
// and device with an HLL of user_id (90 days × 20 × 3 groups).
func BenchmarkGroupsFeed(b *testing.B) {
	fields, _ := parseFields([]string{"count", "hll:14:5:int8"})
	countries := []string{"US", "IN", "DE", "GB", "BR", "FR", "JP", "CA", "MX", "ES", "IT", "AU", "NL", "PL", "SE", "KR", "NG", "AR", "ZA", ""}
	devices := []string{"android", "ios", "web"}
	var data []byte
	const n = 1 << 16
	for i := range n {
		c := []byte(countries[(i*7)%len(countries)])
		if len(c) == 0 {
			c = nil
		}
		data = append(data, tuple(true, int64(i%90)*usPerDay+int64(i)*1000, c, []byte(devices[(i*13)%3]), nil,
			int8v(int64((i*2654435761)%2000000)))...)
	}
	g := newGroups(2, fields, bucketer{grain: catalog.Day})
	g.rd.headerDone = true
	b.SetBytes(int64(len(data) / n))
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		if _, err := g.feed(data); err != nil {
			b.Fatal(err)
		}
	}
}
