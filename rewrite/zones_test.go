package rewrite

import (
	"testing"

	"github.com/pgsketch/pgsketch/catalog"
)

func TestZoneFaults(t *testing.T) {
	for _, c := range []struct {
		zone      string
		hour, day bool
	}{
		{"UTC", false, false}, {"Etc/GMT-3", false, false}, {"Europe/Berlin", false, false},
		{"America/New_York", false, false}, {"Asia/Kolkata", false, false}, {"Australia/Adelaide", false, false},
		{"America/Santiago", false, false}, {"Atlantic/Azores", false, false}, {"America/Havana", false, false},
		{"Pacific/Apia", false, false},
		{"Australia/Lord_Howe", true, false}, {"Pacific/Chatham", true, false}, {"Asia/Kathmandu", true, false},
		{"America/St_Johns", true, true}, {"Nowhere/Atlantis", true, true},
	} {
		hour, day := zoneFault(c.zone, catalog.Hour) != "", zoneFault(c.zone, catalog.Day) != ""
		if hour != c.hour || day != c.day {
			t.Errorf("%s: hour fault %v (%s), day fault %v (%s); want %v, %v", c.zone, hour, zoneFault(c.zone, catalog.Hour), day, zoneFault(c.zone, catalog.Day), c.hour, c.day)
		}
	}
}
