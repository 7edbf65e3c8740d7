package benchproxy

import "testing"

func TestCompare(t *testing.T) {
	exact := map[string]float64{"US": 100_000, "DE": 50_000}
	for _, c := range []struct {
		ans map[string]float64
		ok  bool
	}{
		{map[string]float64{"US": 100_500, "DE": 49_500}, true},
		{map[string]float64{"US": 100_000}, false},
		{map[string]float64{"US": 100_000, "FR": 50_000}, false},
		{map[string]float64{"US": 105_000, "DE": 50_000}, false}, // 6.2 standard errors off
	} {
		if err := Compare(c.ans, exact); (err == nil) != c.ok {
			t.Errorf("Compare(%v) = %v", c.ans, err)
		}
	}
}

func TestFromRollup(t *testing.T) {
	if !FromRollup([]string{"pgsketch: answered from rollup events_daily"}, "events_daily") {
		t.Error("one NOTICE naming the rollup: not from it")
	}
	if FromRollup(nil, "events_daily") || FromRollup([]string{"rollup events_daily", "x"}, "events_daily") {
		t.Error("none, or two NOTICEs: from the rollup")
	}
}
