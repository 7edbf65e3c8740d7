package refresh

import (
	"fmt"
	"math"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
)

// PostgreSQL's binary dates and timestamps count from 2000-01-01: days
// (int32) and microseconds (int64) of wall-clock time, with the extreme
// values standing for -infinity and infinity.
const (
	usPerHour = int64(time.Hour / time.Microsecond)
	usPerDay  = 24 * usPerHour
	// pgEpochUnix is 2000-01-01 00:00:00 UTC in Unix seconds.
	pgEpochUnix = 946684800
	// monday is the day number of 2000-01-03, a Monday: ISO weeks start there.
	monday = 2
)

// bucketer cuts wall-clock times into the start of their bucket, exactly as
// date_trunc(grain, t) does for a timestamp (and for a date cast to one):
// ISO weeks start on Monday, infinities stay as they are. With no grain,
// times are bucket starts already and stay as they are.
type bucketer struct {
	grain catalog.Grain
	date  bool // values are int32 days, not int64 microseconds
}

// days returns the start, in days, of the bucket holding day d.
func (b bucketer) days(d int64) int64 {
	switch b.grain {
	case catalog.Week:
		return d - floorMod(d-monday, 7)
	case catalog.Month:
		t := time.Unix(pgEpochUnix+d*86400, 0).UTC()
		first := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return (first.Unix() - pgEpochUnix) / 86400
	}
	return d
}

// micros returns the start of the bucket holding timestamp v (µs).
func (b bucketer) micros(v int64) int64 {
	if v == math.MaxInt64 || v == math.MinInt64 || b.grain == "" {
		return v
	}
	if b.grain == catalog.Hour {
		return v - floorMod(v, usPerHour)
	}
	return b.days(floorDiv(v, usPerDay)) * usPerDay
}

// dateDays returns the start of the bucket holding date d (days).
func (b bucketer) dateDays(d int32) int32 {
	if d == math.MaxInt32 || d == math.MinInt32 || b.grain == "" {
		return d
	}
	return int32(b.days(int64(d)))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// localText prints a finite local timestamp (µs) as PostgreSQL reads it:
// years beyond 9999 with more digits, years before 1 as "BC" (year 0 is
// 1 BC).
func localText(v int64) (string, error) {
	t := time.Unix(pgEpochUnix+floorDiv(v, 1e6), floorMod(v, 1e6)*1000).UTC()
	y, bc := t.Year(), ""
	if y <= 0 {
		y, bc = 1-y, " BC"
	}
	return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d.%06d%s", y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(),
		t.Nanosecond()/1000, bc), nil
}
