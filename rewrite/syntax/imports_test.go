package syntax

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyImporterOfTheParser checks that no package of the module but
// this one imports PostgreSQL's parser: the syntax tree is the only view of
// SQL the planners have.
func TestOnlyImporterOfTheParser(t *testing.T) {
	out, err := exec.Command("go", "list", "-test", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/pgsketch/pgsketch/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if !strings.Contains(" "+imports+" ", " github.com/pganalyze/pg_query_go/v6 ") {
			continue
		}
		self := pkg == "github.com/pgsketch/pgsketch/rewrite/syntax" || strings.HasPrefix(pkg, "github.com/pgsketch/pgsketch/rewrite/syntax [")
		if !self {
			t.Errorf("%s imports the PostgreSQL parser; only package syntax may", pkg)
		}
		found = found || self
	}
	if !found {
		t.Error("go list shows no importer of the parser at all: the check reads the wrong output")
	}
}
