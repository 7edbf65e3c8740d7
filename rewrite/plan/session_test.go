package plan

import "testing"

func TestZoneValues(t *testing.T) {
	zones, ok := ZoneValues(map[int]string{12: "UTC", 1: "America/New_York", 2: ""})
	if !ok {
		t.Fatal("not encoded")
	}
	s := Session{Zones: zones}
	for n, want := range map[int]string{1: "America/New_York", 2: "", 12: "UTC"} {
		if got, ok := s.Zone(n); !ok || got != want {
			t.Errorf("$%d = %q, %v; want %q", n, got, ok, want)
		}
	}
	for _, n := range []int{0, 3, 11, 21} {
		if got, ok := s.Zone(n); ok {
			t.Errorf("$%d = %q, want none", n, got)
		}
	}
	if _, ok := ZoneValues(map[int]string{1: "UTC\x002\x00Asia/Kolkata"}); ok {
		t.Error("a value holding NUL encoded")
	}
	a, _ := ZoneValues(map[int]string{1: "UTC", 2: "Europe/Berlin"})
	b, _ := ZoneValues(map[int]string{2: "Europe/Berlin", 1: "UTC"})
	if a != b {
		t.Errorf("the encoding depends on the map's order: %q, %q", a, b)
	}
}
