package refresh

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestBackgroundVerdict: the background refresher refreshes the rollups
// its role owns and says why it refreshes none: no catalog, no rollups, a
// role that owns none of them or may not write the catalog.
func TestBackgroundVerdict(t *testing.T) {
	owned := probedRollup{name: "a", owner: "owner", owned: true}
	other := probedRollup{name: "b", owner: "alice"}
	for _, c := range []struct {
		p    probed
		mine string
		note string
	}{
		{probed{role: "r", database: "d"}, "", "database d has no pgsketch catalog (pgsketch-proxy migrate up creates it)"},
		{probed{role: "r", database: "d", catalog: true, writes: true}, "", "database d has no rollups yet"},
		{probed{role: "r", database: "d", catalog: true, rollups: []probedRollup{other}}, "",
			"role r owns none of the rollups of database d: b (owned by alice); log in as the role that owns them"},
		{probed{role: "r", database: "d", catalog: true, rollups: []probedRollup{owned}}, "",
			"role r may not write the pgsketch catalog of database d"},
		{probed{role: "owner", database: "d", catalog: true, writes: true, rollups: []probedRollup{owned, other}}, "a",
			"refreshing 1 rollup(s) of database d as role owner every 1m0s: a; not those role owner does not own: b (owned by alice)"},
	} {
		mine, note := c.p.verdict(time.Minute)
		if strings.Join(mine, ",") != c.mine || !strings.HasPrefix(note, c.note) {
			t.Errorf("%+v: %q, %q; want %q, %q", c.p, mine, note, c.mine, c.note)
		}
	}
}

// TestBackgroundSaysOnce: a refresher without a login, or turned off, says
// so once, in its log and its status, and returns.
func TestBackgroundSaysOnce(t *testing.T) {
	var log bytes.Buffer
	b := &Background{NoLogin: "no login: none given", Interval: time.Minute, Log: slog.New(slog.NewTextHandler(&log, nil))}
	b.Run(context.Background())
	b.Run(context.Background())
	if n := strings.Count(log.String(), "background refresher cannot refresh"); n != 1 {
		t.Errorf("said %d times:\n%s", n, log.String())
	}
	if st := b.Status(); st.Refreshing || st.Note != "no login: none given" || st.Rounds != 0 || st.Interval != time.Minute {
		t.Errorf("status %+v", st)
	}
	log.Reset()
	off := &Background{DSN: "postgres://owner@db/x", Off: "turned off", Log: slog.New(slog.NewTextHandler(&log, nil))}
	off.Run(context.Background())
	if !strings.Contains(log.String(), `level=INFO msg="background refresher off" reason="turned off"`) || off.Status().Rounds != 0 {
		t.Errorf("off: %s %+v", log.String(), off.Status())
	}
}
