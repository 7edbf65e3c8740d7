package rewrite

import (
	"strings"
	"testing"
	"time"
)

// TestClockForward: bounds at New York's midnights, and the millisecond
// before them, are clear of its clock changes at 2:00, in March and in
// November; Havana moves its clocks at midnight, where a bound then lies
// in the hour it skips (or a millisecond before it), and a bound inside
// the hour New York repeats in November is refused.
func TestClockForward(t *testing.T) {
	at := func(s ...string) []time.Time {
		var out []time.Time
		for _, v := range s {
			x, err := time.Parse("2006-01-02 15:04:05.999", v)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, x)
		}
		return out
	}
	for _, c := range []struct {
		zone   string
		bounds []time.Time
		ok     bool
	}{
		{"America/New_York", at("2024-03-09 23:59:59.999", "2024-03-10 00:00:00", "2024-03-10 23:59:59.999", "2024-11-03 00:00:00", "2024-11-03 23:59:59.999"), true},
		{"UTC", at("2024-03-10 00:00:00"), true},
		{"America/New_York", at("2024-11-03 01:30:00"), false},
		{"America/New_York", at("2024-03-10 02:30:00"), false},
		{"America/Havana", at("2024-03-10 00:00:00"), false},
		{"America/Havana", at("2024-03-09 23:59:59.999"), false},
		{"America/Havana", at("2024-03-08 23:59:59.999", "2024-03-11 00:00:00"), true},
	} {
		why := clockForward(c.zone, c.bounds)
		if (why == "") != c.ok {
			t.Errorf("%s %v: %q, want ok %v", c.zone, c.bounds, why, c.ok)
		}
		if why != "" && !strings.Contains(why, "changes its clocks at a window bound") {
			t.Errorf("%s: %q", c.zone, why)
		}
	}
}
