package syntax

import (
	"fmt"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	stmts, err := Split("SELECT 1; /* a; */ SELECT count(DISTINCT user_id) FROM events WHERE note = 'a;b' ;BEGIN;COPY t FROM STDIN; select 2")
	if err != nil {
		t.Fatal(err)
	}
	want := []Statement{{SQL: "SELECT 1"}, {SQL: "/* a; */ SELECT count(DISTINCT user_id) FROM events WHERE note = 'a;b'"},
		{SQL: "BEGIN", Control: true}, {SQL: "COPY t FROM STDIN", Control: true}, {SQL: "select 2"}}
	if fmt.Sprint(stmts) != fmt.Sprint(want) {
		t.Errorf("Split:\n got %+v\nwant %+v", stmts, want)
	}
	if _, err := Split("SELECT (("); err == nil {
		t.Error("Split of a syntax error: no error")
	}
	if _, err := Split(strings.Repeat("(", MaxNestingDepth+1)); err == nil {
		t.Error("Split past the nesting cap: no error")
	}
}
