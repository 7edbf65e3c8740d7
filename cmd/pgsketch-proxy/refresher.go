package main

import (
	"context"
	"net/url"
	"os"
	"strings"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/status"
)

// refresher is serve's background refresher: it logs in with --refresh-dsn,
// else with --upstream when that names a user (libpq's defaults fill in
// what it leaves out: the database named as the user, the password from
// PGPASSWORD or the password file); without either it only says it has no
// login. Whether that role may refresh a rollup is decided in PostgreSQL
// at every round (refresh.Background). The status page lists the rollups
// of that login's database, the refresher on or off.
func (o *serveOptions) refresher(a *app) *refresh.Background {
	bg := &refresh.Background{Interval: o.refreshInterval, Log: a.log.With("component", "refresher")}
	switch {
	case o.refreshDSN != "":
		bg.DSN = o.refreshDSN
	case namesUser(o.upstream):
		bg.DSN = o.upstream
	default:
		bg.NoLogin = "no login: --upstream names no user and --refresh-dsn is not given " +
			"(give either the login of the role that owns the rollups)"
	}
	switch {
	case o.refreshInterval == 0:
		bg.Off = "turned off (--refresh-interval 0)"
	case bg.DSN != "":
		a.log.Info("background refresher on", "interval", o.refreshInterval.String(),
			"lock_timeout", refresh.BackgroundLockTimeout.String(), "login", loginFlag(o))
	}
	return bg
}

// loginFlag names the flag the refresher's login came from.
func loginFlag(o *serveOptions) string {
	if o.refreshDSN != "" {
		return "--refresh-dsn"
	}
	return "--upstream"
}

// startRefresher runs bg in the background; the function it returns stops
// it and waits until it has (a refresh under way is rolled back).
func startRefresher(ctx context.Context, bg *refresh.Background) (stop func()) {
	done := make(chan struct{})
	rctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		bg.Run(rctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// refresherStatus is bg's state as the status page shows it.
func refresherStatus(bg *refresh.Background) status.Refresher {
	s := bg.Status()
	return status.Refresher{Refreshing: s.Refreshing, Note: s.Note, Interval: s.Interval,
		Rounds: s.Rounds, Refreshed: s.Refreshed, GaveWay: s.GaveWay, Failed: s.Failed,
		LastRound: s.LastRound, LastRefresh: s.LastRefresh, LastError: s.LastError}
}

// namesUser reports whether the libpq connection string s (a URL or
// key=value pairs) names a user, or PGUSER does.
func namesUser(s string) bool {
	if os.Getenv("PGUSER") != "" {
		return true
	}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		return err == nil && (u.User.Username() != "" || u.Query().Get("user") != "")
	}
	return connKeywords(s)["user"] != ""
}

// connKeywords reads a libpq key=value connection string: keys and values
// separated by '=' with optional spaces around it, a value unquoted up to
// the next space or in single quotes, a backslash escaping the character
// after it. It returns nil for a string it cannot read.
func connKeywords(s string) map[string]string {
	kv := map[string]string{}
	i := 0
	space := func() {
		for i < len(s) && strings.IndexByte(" \t\n\r\f\v", s[i]) >= 0 {
			i++
		}
	}
	for {
		space()
		if i == len(s) {
			return kv
		}
		k := i
		for i < len(s) && s[i] != '=' && strings.IndexByte(" \t\n\r\f\v", s[i]) < 0 {
			i++
		}
		key := s[k:i]
		space()
		if key == "" || i == len(s) || s[i] != '=' {
			return nil
		}
		i++
		space()
		var v strings.Builder
		quoted := i < len(s) && s[i] == '\''
		if quoted {
			i++
		}
		for ; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				v.WriteByte(s[i])
				continue
			}
			if quoted && c == '\'' {
				break
			}
			if !quoted && strings.IndexByte(" \t\n\r\f\v", c) >= 0 {
				break
			}
			v.WriteByte(c)
		}
		if quoted {
			if i == len(s) {
				return nil // no closing quote
			}
			i++
		}
		kv[key] = v.String()
	}
}
