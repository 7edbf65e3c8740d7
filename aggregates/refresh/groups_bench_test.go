package refresh

import (
	"fmt"
	"testing"
)

// BenchmarkGroupsAdd feeds lines shaped like a daily rollup's by country
// and device with an HLL of user_id (90 buckets × 20 × 3 groups).
func BenchmarkGroupsAdd(b *testing.B) {
	fields, _ := parseFields([]string{"count", "hll:14:5"})
	countries := []string{"US", "IN", "DE", "GB", "BR", "FR", "JP", "CA", "MX", "ES", "IT", "AU", "NL", "PL", "SE", "KR", "NG", "AR", "ZA", `\N`}
	devices := []string{"android", "ios", "web"}
	lines := make([][]byte, 1<<16)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, "t\t2026-%02d-%02d 00:00:00\t%s\t%s\t\\N\t%d", 1+i%3, 1+i%28,
			countries[(i*7)%len(countries)], devices[(i*13)%3], (i*2654435761)%2000000)
	}
	g := newGroups(2, fields)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.add(lines[i&(len(lines)-1)]); err != nil {
			b.Fatal(err)
		}
	}
}
