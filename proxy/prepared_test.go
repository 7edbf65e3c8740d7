package proxy

import (
	"testing"

	"github.com/pgsketch/pgsketch/upstream"
)

// TestPreparedKeyedBySettings: a statement prepared under one TimeZone (or
// any setting PostgreSQL reads when it parses) is not bound under
// another: its typed literals were converted when it was parsed.
func TestPreparedKeyedBySettings(t *testing.T) {
	var ps preparedStmts
	st := upstream.Statement{SQL: "SELECT '2026-01-10'::timestamptz"}
	ps.settings = "public\x00UTC"
	utc, fresh, _ := ps.name(st)
	if !fresh {
		t.Fatal("the first statement is not prepared")
	}
	ps.settings = "public\x00Asia/Tokyo"
	tokyo, fresh, _ := ps.name(st)
	if !fresh || tokyo == utc {
		t.Fatalf("under another TimeZone: %s (fresh %v), prepared under UTC as %s", tokyo, fresh, utc)
	}
	ps.settings = "public\x00UTC"
	if again, fresh, _ := ps.name(st); fresh || again != utc {
		t.Fatalf("under UTC again: %s (fresh %v), want %s kept", again, fresh, utc)
	}
}
