package benchproxy

import "testing"

func TestURL(t *testing.T) {
	p := &Proxy{Addr: "127.0.0.1:6543"}
	for dsn, want := range map[string]string{
		"postgres://bench:pw@127.0.0.1:55999/postgres?sslmode=disable": "postgres://bench:pw@127.0.0.1:6543/postgres?sslmode=disable",
		"host=127.0.0.1 port=55999 user=postgres dbname=events":        "postgres://postgres@127.0.0.1:6543/events?sslmode=disable",
		"host=/tmp user=bench password='p w' dbname=x":                 "postgres://bench:p%20w@127.0.0.1:6543/x?sslmode=disable",
		"host='unterminated": "",
	} {
		if got := p.URL(dsn); got != want {
			t.Errorf("URL(%q) = %q, want %q", dsn, got, want)
		}
	}
}
