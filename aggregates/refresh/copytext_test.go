package refresh

import (
	"bytes"
	"strings"
	"testing"
)

func TestUnescape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`plain`, "plain"},
		{`a\\b`, `a\b`},
		{`tab\there`, "tab\there"},
		{`\n\r\b\f\v`, "\n\r\b\f\v"},
		{`\101\0\7`, "A\x00\x07"},
		{`\1234`, "S4"}, // at most three octal digits
		{`\x41\x4a4`, "AJ4"},
		{`\xg`, "xg"}, // \x without a hex digit is x
		{`\q`, "q"},
		{`\N`, "N"}, // unescape is only called on non-NULL fields
	} {
		got, err := unescape(nil, []byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("unescape(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := unescape(nil, []byte(`ends\`)); err == nil {
		t.Error("trailing backslash accepted")
	}
}

func TestGroupsAdd(t *testing.T) {
	fields, err := parseFields([]string{"count", "hll:10:5", "sum"})
	if err != nil {
		t.Fatal(err)
	}
	g := newGroups(1, fields)
	for _, line := range []string{
		"t\t2026-01-01\tUS\t\\N\tuser\\t1\t\\N",
		"t\t2026-01-01\tUS\t\\N\tuser2\t\\N",
		"t\t2026-01-01\tUS\t\\N\t\\N\t\\N",
		"f\t2026-01-01\tUS\t3\t\\N\t12.50",
	} {
		if err := g.add([]byte(line)); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
	var out bytes.Buffer
	if err := g.writeTo(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d rows:\n%s", len(lines), out.String())
	}
	us := strings.Split(lines[0], "\t")
	if us[0] != "2026-01-01" || us[1] != "US" || us[2] != "3" || !strings.HasPrefix(us[3], `\\x12`) || us[4] != "12.50" {
		t.Fatalf("US row %q", lines[0])
	}
	// A group without its partials row cannot write its sum.
	if err := g.add([]byte("t\t2026-01-01\t\\N\t\\N\tuser\t\\N")); err != nil {
		t.Fatal(err)
	}
	if err := g.writeTo(&out); err == nil {
		t.Fatal("a group without its partials row wrote a sum")
	}
	for _, bad := range []string{"t\t2026\tUS\tonly", "x\t2026-01-01\tUS\t1\t\\N\t1", "f\t2026-01-01\tUS\t1\t\\N\t1"} {
		if err := g.add([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzGroups feeds arbitrary COPY lines to the accumulator: errors are fine,
// panics are not.
func FuzzGroups(f *testing.F) {
	f.Add([]byte("t\t2026-01-01\tUS\t\\N\tuser\\t1\t\\N"))
	f.Add([]byte("f\t2026-01-01\tUS\t3\t\\N\t12.50"))
	f.Add([]byte("t\t\\x\t\\0\t\\\t\\777\t\\N"))
	f.Fuzz(func(t *testing.T, line []byte) {
		fields, _ := parseFields([]string{"count", "hll:4:1", "sum"})
		g := newGroups(1, fields)
		for _, l := range bytes.Split(line, []byte("\n")) {
			_ = g.add(l)
		}
		_ = g.writeTo(&bytes.Buffer{})
	})
}
