package localpg

import (
	"context"
	"net/url"
	"os"
	"testing"
)

// TestServer returns a superuser connection string for a package's tests:
// PGSKETCH_TEST_DSN when it is set, else a throwaway local cluster's
// (database postgres), removed when t ends. Like the end-to-end tests, it
// fails t, naming the packages to install, where there is neither.
func TestServer(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv("PGSKETCH_TEST_DSN"); dsn != "" {
		return dsn
	}
	c, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Remove() })
	return c.URL("postgres")
}

// WithDatabase returns connString (a URL or keyword/value string) naming
// database db.
func WithDatabase(connString, db string) string {
	if u, err := url.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		return u.String()
	}
	return connString + " dbname=" + db
}
