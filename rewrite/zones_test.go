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

func TestUTCHours(t *testing.T) {
	for _, c := range []struct {
		zone string
		ok   bool
	}{
		{"UTC", true}, {"Etc/GMT-3", true}, {"America/New_York", true}, {"Europe/Berlin", true},
		{"Australia/Sydney", true}, {"America/Sao_Paulo", true},
		{"Asia/Kolkata", false}, {"Australia/Adelaide", false}, {"Asia/Kathmandu", false},
		{"Australia/Lord_Howe", false}, {"America/St_Johns", false}, {"Pacific/Chatham", false},
		{"Nowhere/Atlantis", false},
	} {
		if why := utcHours(c.zone); (why == "") != c.ok {
			t.Errorf("%s: utcHours %q, want ok %v", c.zone, why, c.ok)
		}
	}
}
