package rewrite

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsketch/pgsketch/internal/localpg"
)

// TestAbbreviationsAsShipped: pgAbbreviations holds every abbreviation of
// the sets the installed PostgreSQL ships (Default, Australia, India),
// and nothing else.
func TestAbbreviationsAsShipped(t *testing.T) {
	bin, err := localpg.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "pg_config"), "--sharedir").Output()
	if err != nil {
		t.Fatalf("pg_config --sharedir: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "timezonesets")
	got := map[string]bool{}
	for set := range shippedAbbreviationSets {
		if set == "" {
			continue
		}
		f, err := os.Open(filepath.Join(dir, set))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' || line[0] == '@' || line[0] == ' ' || line[0] == '\t' {
				continue
			}
			got[strings.ToLower(strings.Fields(line)[0])] = true
		}
		f.Close()
	}
	for a := range got {
		if !pgAbbreviations[a] {
			t.Errorf("%s: an abbreviation of the installed sets that pgsketch does not know", a)
		}
	}
	for a := range pgAbbreviations {
		if !got[a] {
			t.Errorf("%s: not an abbreviation of the installed sets", a)
		}
	}
	for _, z := range []string{"EST", "cet", " PST", "IST", "MSK"} {
		if !zoneAbbreviation(z) {
			t.Errorf("%q is not taken for an abbreviation", z)
		}
	}
	for _, z := range []string{"UTC", "Zulu", "GMT", "America/New_York", "EST5EDT", "Etc/GMT+5", "Europe/Paris"} {
		if zoneAbbreviation(z) {
			t.Errorf("%q is taken for an abbreviation", z)
		}
	}
}
