package benchkit

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// LevelChange is what SetLevels did.
type LevelChange struct {
	Dropped, Added []string
	Refresh        refresh.Result // of the refresh that built the added levels
	Took           time.Duration  // that refresh's time
}

// SetLevels gives rollup exactly the levels listed (comma-separated):
// it drops the others, adds the missing ones and builds them with an
// incremental refresh (two streams).
func SetLevels(ctx context.Context, conn *pgx.Conn, dsn, rollup, levels string) (LevelChange, error) {
	var c LevelChange
	want := map[string]bool{}
	for _, g := range strings.Split(levels, ",") {
		if g = strings.TrimSpace(g); g != "" {
			want[g] = true
		}
	}
	have, err := Strings(ctx, conn, "SELECT grain FROM pgsketch.rollup_levels WHERE rollup = $1", rollup)
	if err != nil {
		return c, err
	}
	for _, g := range have {
		if !want[g] {
			if _, err := conn.Exec(ctx, "SELECT pgsketch.drop_rollup_level($1, $2)", rollup, g); err != nil {
				return c, err
			}
			c.Dropped = append(c.Dropped, g)
		}
		delete(want, g)
	}
	for g := range want {
		if _, err := conn.Exec(ctx, "SELECT pgsketch.add_rollup_level($1, $2)", rollup, g); err != nil {
			return c, err
		}
		c.Added = append(c.Added, g)
	}
	if len(c.Added) == 0 {
		return c, nil
	}
	t0 := time.Now()
	c.Refresh, err = refresh.Refresh(ctx, pgsession.Conn{C: conn.PgConn()}, rollup, refresh.Options{Streams: 2, Dial: pgsession.Dial(dsn)})
	c.Took = time.Since(t0)
	return c, err
}
