package upstream

import (
	"context"
	"testing"
)

// recorder is a Session that records the statement Query runs.
type recorder struct {
	// Rows runs only Query: the rest are nil.
	Session
	st Statement
}

func (r *recorder) Query(_ context.Context, st Statement) (*Result, error) {
	r.st = st
	return &Result{Rows: [][][]byte{{[]byte("1")}}}, nil
}

// TestRows: the arguments are text parameters (nil is NULL), the rows come
// back as Query returns them, and an argument of another type is refused
// before anything runs.
func TestRows(t *testing.T) {
	r := &recorder{}
	rows, err := Rows(context.Background(), r, "SELECT $1, $2", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || string(rows[0][0]) != "1" {
		t.Errorf("rows %q", rows)
	}
	st := r.st
	if st.SQL != "SELECT $1, $2" || len(st.Params) != 2 || string(st.Params[0]) != "a" || st.Params[1] != nil ||
		st.ParamOIDs != nil || st.ParamFormats != nil || st.ResultFormats != nil {
		t.Errorf("statement %+v", st)
	}
	r.st = Statement{}
	if _, err := Rows(context.Background(), r, "SELECT $1", 1); err == nil || r.st.SQL != "" {
		t.Errorf("an int argument: %v, ran %q", err, r.st.SQL)
	}
}

func TestSetLocalZone(t *testing.T) {
	for zone, want := range map[string]string{
		"":                 "",
		"America/New_York": "SET LOCAL TimeZone = 'America/New_York'",
		"<+05>-05":         "SET LOCAL TimeZone = '<+05>-05'",
		"it's":             "SET LOCAL TimeZone = 'it''s'",
		`a\b`:              `SET LOCAL TimeZone = E'a\\b'`,
	} {
		if got := SetLocalZone(zone); got != want {
			t.Errorf("SetLocalZone(%q) = %q, want %q", zone, got, want)
		}
	}
}
