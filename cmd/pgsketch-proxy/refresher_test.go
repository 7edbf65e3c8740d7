package main

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestNamesUser: the background refresher logs in with --upstream only
// when that names a user, in either form of a libpq connection string.
func TestNamesUser(t *testing.T) {
	t.Setenv("PGUSER", "")
	for s, want := range map[string]bool{
		"postgres://db:5432/?sslmode=require":                 false,
		"postgres://owner:secret@db:5432/analytics":           true,
		"postgresql://owner@db/analytics":                     true,
		"postgres://db/analytics?user=owner":                  true,
		"postgres://:secret@db/analytics":                     false,
		"host=db port=5432 sslmode=require":                   false,
		"host=db user=owner dbname=analytics":                 true,
		"host = db user = 'the owner' password='x\\' user=y'": true,
		"host=db password='user=owner'":                       false,
		"host=db user=''":                                     false,
		"host=db user='unterminated":                          false,
	} {
		if got := namesUser(s); got != want {
			t.Errorf("namesUser(%q) = %v, want %v", s, got, want)
		}
	}
	t.Setenv("PGUSER", "owner")
	if !namesUser("host=db") {
		t.Error("PGUSER names the user libpq logs in as")
	}
}

// TestRefresherLogin: --refresh-dsn wins, then --upstream naming a user;
// without either the refresher has no login and says why, and
// --refresh-interval 0 turns it off.
func TestRefresherLogin(t *testing.T) {
	t.Setenv("PGUSER", "")
	a := &app{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range []struct {
		o        serveOptions
		off, why bool
		want     string
	}{
		{o: serveOptions{upstream: "postgres://db/", refreshDSN: "postgres://refresher@db/x", refreshInterval: time.Minute},
			want: "postgres://refresher@db/x"},
		{o: serveOptions{upstream: "postgres://owner@db/x", refreshInterval: time.Minute}, want: "postgres://owner@db/x"},
		{o: serveOptions{upstream: "postgres://db/", refreshInterval: time.Minute}, why: true},
		{o: serveOptions{upstream: "postgres://owner@db/x"}, off: true, want: "postgres://owner@db/x"},
	} {
		bg := c.o.refresher(a)
		if bg.DSN != c.want || (bg.Off != "") != c.off || (bg.NoLogin != "") != c.why {
			t.Errorf("%+v: DSN %q, Off %q, NoLogin %q", c.o, bg.DSN, bg.Off, bg.NoLogin)
		}
	}
}
