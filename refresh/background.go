package refresh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// BackgroundLockTimeout bounds every lock wait of the background refresher's
// session: lock_timeout, and pgsketch.ddl_lock_timeout for the capture
// triggers' DDL. A statement of the application that asks for a lock
// conflicting with one the refresher waits for queues behind it, so the
// refresher gives up after this long and its next round retries. It is
// shorter than PostgreSQL's deadlock_timeout (1 s by default): a wait of
// the refresher ends before its own deadlock check would run.
const BackgroundLockTimeout = 500 * time.Millisecond

// probeTimeout is the statement_timeout of the background refresher's own
// look at the catalog. A refresh itself runs under the login's own
// statement_timeout: its reading takes as long as the rows it reads.
const probeTimeout = "10s"

// connectTimeout bounds the background refresher's login.
const connectTimeout = 30 * time.Second

// Background is the background refresher: every Interval, starting at
// once, it logs in with DSN and refreshes (incrementally, one stream) every
// rollup of that database whose tables the login's role owns. What it
// cannot do — no login, a login that fails, no catalog, no rollups, a
// role that owns none of them or may not write the catalog — it says once
// in the log and in its Status, and tries again at the next round; a round
// never fails the proxy. Its refreshes are Refresh's transactions, so one
// that fails or gives up leaves the rollup as it was.
type Background struct {
	// DSN is the login (a libpq URL or key=value string naming the user,
	// the password or where to find it, and the database). Empty: there
	// is none, and NoLogin says why.
	DSN, NoLogin string
	// Off, when set, says why the refresher is turned off: Run says so and
	// returns (as it does for an Interval of 0).
	Off      string
	Interval time.Duration
	Log      *slog.Logger

	mu sync.Mutex
	st BackgroundStatus
	// said is the last Note logged.
	said string
}

// BackgroundStatus is what the background refresher is doing, for the
// status page and the metrics.
type BackgroundStatus struct {
	// Refreshing: the last round found rollups it may refresh. Note says
	// what it does, or why it refreshes nothing.
	Refreshing bool
	Note       string
	Interval   time.Duration
	// Rounds counts the rounds run; Refreshed, GaveWay and Failed the
	// refreshes committed, given up for a lock not granted within the lock
	// timeout, and failed otherwise.
	Rounds, Refreshed, GaveWay, Failed int64
	LastRound, LastRefresh             time.Time
	// LastError is the last refresh that gave way or failed, and why.
	LastError string
}

// Status returns a copy of the refresher's status.
func (b *Background) Status() BackgroundStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.st
	st.Interval = b.Interval
	return st
}

// Run refreshes until ctx ends: a round at once, then one every Interval.
func (b *Background) Run(ctx context.Context) {
	switch {
	case b.Off != "":
		b.note(false, slog.LevelInfo, "background refresher off", b.Off)
		return
	case b.Interval <= 0:
		b.note(false, slog.LevelInfo, "background refresher off", "turned off (no interval)")
		return
	case b.DSN == "":
		b.note(false, slog.LevelWarn, "background refresher cannot refresh", b.NoLogin)
		return
	}
	t := time.NewTicker(b.Interval)
	defer t.Stop()
	for {
		b.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// note records what the refresher does (refreshing) or why it does not,
// and logs it at level when it differs from what was logged last.
func (b *Background) note(refreshing bool, level slog.Level, msg, note string) {
	b.mu.Lock()
	b.st.Refreshing, b.st.Note = refreshing, note
	changed := note != b.said
	b.said = note
	b.mu.Unlock()
	if changed && b.Log != nil {
		b.Log.Log(context.Background(), level, msg, "reason", note)
	}
}

// round runs one round: log in, find the rollups the role may refresh,
// refresh each.
func (b *Background) round(ctx context.Context) {
	b.mu.Lock()
	b.st.Rounds++
	b.st.LastRound = time.Now()
	b.mu.Unlock()
	conn, err := b.connect(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.note(false, slog.LevelWarn, "background refresher cannot refresh", "cannot log in: "+err.Error())
		}
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	c := pgsession.Conn{C: conn}
	p, err := probe(ctx, c)
	if err != nil {
		if ctx.Err() == nil {
			b.note(false, slog.LevelWarn, "background refresher cannot refresh", "cannot read the catalog: "+err.Error())
		}
		return
	}
	mine, note := p.verdict(b.Interval)
	if len(mine) == 0 {
		b.note(false, slog.LevelWarn, "background refresher cannot refresh", note)
		return
	}
	b.note(true, slog.LevelInfo, "background refresher refreshing", note)
	for _, name := range mine {
		if ctx.Err() != nil || conn.IsClosed() {
			return
		}
		b.refreshOne(ctx, c, name)
	}
}

// connect logs in with DSN, names the session (unless the login does) and
// sets its lock timeouts.
func (b *Background) connect(ctx context.Context) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(b.DSN)
	if err != nil {
		return nil, err
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = ApplicationName
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, err
	}
	lt := fmt.Sprintf("'%dms'", BackgroundLockTimeout.Milliseconds())
	if _, err := conn.Exec(ctx, "SET lock_timeout = "+lt+"; SET pgsketch.ddl_lock_timeout = "+lt).ReadAll(); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// ApplicationName is the application_name of the background refresher's
// sessions, unless its login sets one.
const ApplicationName = "pgsketch-proxy refresher"

// refreshOne refreshes rollup name and records the outcome.
func (b *Background) refreshOne(ctx context.Context, c pgsession.Conn, name string) {
	start := time.Now()
	res, err := Refresh(ctx, c, name, Options{})
	if err != nil && ctx.Err() != nil {
		return // shutting down: the refresh was rolled back
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var pe *pgconn.PgError
	switch {
	case err == nil:
		b.st.Refreshed++
		b.st.LastRefresh = time.Now()
		if b.Log != nil {
			b.Log.Info("refreshed", "rollup", name, "rows_read", res.RowsRead, "written", res.Written,
				"version", res.Version, "watermark", res.Watermark, "elapsed", res.Elapsed.Round(time.Millisecond).String())
		}
	case errors.As(err, &pe) && pe.Code == "55P03":
		// lock_not_available: a lock was not granted within lock_timeout.
		b.st.GaveWay++
		b.st.LastError = fmt.Sprintf("%s: %s: gave way, %v", start.UTC().Format(time.DateTime), name, err)
		if b.Log != nil {
			b.Log.Warn("background refresh gave way: a lock was not granted within the lock timeout; the next round retries",
				"rollup", name, "lock_timeout", BackgroundLockTimeout.String(),
				"waited", time.Since(start).Round(time.Millisecond).String(), "err", err)
		}
	default:
		b.st.Failed++
		b.st.LastError = fmt.Sprintf("%s: %s: %v", start.UTC().Format(time.DateTime), name, err)
		if b.Log != nil {
			b.Log.Error("background refresh failed; the next round retries", "rollup", name, "err", err)
		}
	}
}

// probed is what the background refresher found in its database.
type probed struct {
	role, database string
	// catalog: schema pgsketch exists; writes: the role may write what a
	// refresh writes in it.
	catalog, writes bool
	rollups         []probedRollup
}

type probedRollup struct {
	name, owner string
	// owned: the role owns the rollup table (is a member of its owner, or
	// a superuser), or the table is gone (the refresh then says so).
	owned bool
}

// probe reads who the session is, whether the database has the catalog,
// and who owns each rollup's table, under probeTimeout.
func probe(ctx context.Context, c pgsession.Conn) (*probed, error) {
	if err := c.Exec(ctx, "SET statement_timeout = '"+probeTimeout+"'"); err != nil {
		return nil, err
	}
	rows, err := upstream.Rows(ctx, c, `SELECT current_user, current_database(),
		to_regclass('pgsketch.rollup_defs') IS NOT NULL AND to_regclass('pgsketch.rollup_dirty') IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 || len(rows[0]) != 3 {
		return nil, errors.New("no answer")
	}
	p := &probed{role: string(rows[0][0]), database: string(rows[0][1]), catalog: string(rows[0][2]) == "t"}
	if p.catalog {
		rows, err = upstream.Rows(ctx, c, `SELECT has_table_privilege('pgsketch.rollup_defs', 'UPDATE')
			AND has_table_privilege('pgsketch.rollup_dirty', 'DELETE')`)
		if err != nil {
			return nil, err
		}
		p.writes = len(rows) == 1 && string(rows[0][0]) == "t"
		rows, err = upstream.Rows(ctx, c, `SELECT d.name, coalesce(pg_get_userbyid(c.relowner), ''),
			c.oid IS NULL OR pg_has_role(c.relowner, 'USAGE')
			FROM pgsketch.rollup_defs d
			LEFT JOIN pg_class c ON c.oid = to_regclass(format('%I.%I', d.rollup_schema, d.rollup_table))
			ORDER BY d.name`)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			p.rollups = append(p.rollups, probedRollup{name: string(r[0]), owner: string(r[1]), owned: string(r[2]) == "t"})
		}
	}
	return p, c.Exec(ctx, "RESET statement_timeout")
}

// verdict is the rollups the role may refresh, and a line saying what the
// refresher does with the database's rollups, or why it cannot.
func (p *probed) verdict(interval time.Duration) (mine []string, note string) {
	var others []string
	for _, r := range p.rollups {
		if r.owned {
			mine = append(mine, r.name)
		} else {
			others = append(others, fmt.Sprintf("%s (owned by %s)", r.name, r.owner))
		}
	}
	switch {
	case !p.catalog:
		return nil, fmt.Sprintf("database %s has no pgsketch catalog (pgsketch-proxy migrate up creates it)", p.database)
	case len(p.rollups) == 0:
		return nil, fmt.Sprintf("database %s has no rollups yet", p.database)
	case len(mine) == 0:
		return nil, fmt.Sprintf("role %s owns none of the rollups of database %s: %s; log in as the role that owns them",
			p.role, p.database, strings.Join(others, ", "))
	case !p.writes:
		return nil, fmt.Sprintf("role %s may not write the pgsketch catalog of database %s (UPDATE on pgsketch.rollup_defs, "+
			"DELETE on pgsketch.rollup_dirty): log in as the role that owns the rollups", p.role, p.database)
	}
	note = fmt.Sprintf("refreshing %d rollup(s) of database %s as role %s every %s: %s",
		len(mine), p.database, p.role, interval, strings.Join(mine, ", "))
	if len(others) > 0 {
		note += fmt.Sprintf("; not those role %s does not own: %s", p.role, strings.Join(others, ", "))
	}
	return mine, note
}
