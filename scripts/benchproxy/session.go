package benchproxy

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// Session is a proxy started for a measurement and one client connection
// through it.
type Session struct {
	Proxy *Proxy
	Conn  *Conn
}

// Open starts a proxy in front of upstream as Start does and connects to
// it as Connect does (upstream's URL with the proxy's address).
func Open(ctx context.Context, bin, upstream string, cacheBytes int64, pprof bool) (*Session, error) {
	p, err := Start(ctx, bin, upstream, cacheBytes, pprof)
	if err != nil {
		return nil, err
	}
	c, err := Connect(ctx, p.URL(upstream))
	if err != nil {
		p.Stop()
		return nil, err
	}
	return &Session{Proxy: p, Conn: c}, nil
}

// Close closes the connection, then stops the proxy.
func (s *Session) Close() {
	s.Conn.Close(context.Background())
	s.Proxy.Stop()
}

// Ask runs sql as Timed does on c and returns the NOTICEs of its answer
// too.
func (c *Conn) Ask(ctx context.Context, sql string) (ans map[string]float64, notices []string, d time.Duration, err error) {
	c.ResetNotices()
	ans, d, err = Timed(ctx, c.PgConn, sql)
	return ans, c.Notices(), d, err
}

// FromRollup reports whether the NOTICEs are the one of an answer from
// rollup.
func FromRollup(notices []string, rollup string) bool {
	return len(notices) == 1 && strings.Contains(notices[0], "rollup "+rollup)
}

// Compare checks an answer against the exact one: the same groups, and
// every estimate within 5 standard errors (log2m 14: 1.04/128) of the
// exact count.
func Compare(ans, exact map[string]float64) error {
	if len(ans) != len(exact) {
		return fmt.Errorf("%d groups, the exact answer has %d", len(ans), len(exact))
	}
	for k, v := range ans {
		e, ok := exact[k]
		if !ok {
			return fmt.Errorf("group %q is not in the exact answer", k)
		}
		if se := math.Abs(v-e) / (e * 1.04 / 128); se > 5 {
			return fmt.Errorf("group %q: %v, exact %v (%.1f standard errors)", k, v, e, se)
		}
	}
	return nil
}
