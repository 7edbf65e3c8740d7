package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// upstreamTarget is one way to reach the upstream: an address and the TLS
// configuration to use there (nil: plain).
type upstreamTarget struct {
	network, addr string
	tls           *tls.Config
}

// upstreamTargets turns a libpq connection string into the targets to try
// in order: sslmode=prefer gives TLS first, then plain; require gives TLS
// only; disable gives plain only. User, database and password in it are
// ignored: those come from each client.
func upstreamTargets(connString string) ([]upstreamTarget, string, error) {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, "", fmt.Errorf("upstream %q: %w", redact(connString), err)
	}
	var ts []upstreamTarget
	add := func(host string, port uint16, t *tls.Config) {
		if len(host) > 0 && host[0] == '/' {
			ts = append(ts, upstreamTarget{"unix", filepath.Join(host, ".s.PGSQL."+strconv.Itoa(int(port))), nil})
			return
		}
		ts = append(ts, upstreamTarget{"tcp", net.JoinHostPort(host, strconv.Itoa(int(port))), t})
	}
	add(cfg.Host, cfg.Port, cfg.TLSConfig)
	for _, fb := range cfg.Fallbacks {
		add(fb.Host, fb.Port, fb.TLSConfig)
	}
	return ts, ts[0].addr, nil
}

// redact hides a password in a connection URL for messages.
func redact(s string) string {
	cfg, err := pgconn.ParseConfig(s)
	if err != nil || cfg.Password == "" {
		return s
	}
	return "(connection string with password)"
}

var errUpstreamNoTLS = errors.New("upstream refused TLS")

// dialUpstream connects to the first target that accepts, negotiating TLS
// where the target asks for it, and returns the connection and that target.
func dialUpstream(ctx context.Context, targets []upstreamTarget, timeout time.Duration) (net.Conn, upstreamTarget, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var errs []error
	for _, t := range targets {
		c, err := dialTarget(ctx, t)
		if err == nil {
			return c, t, nil
		}
		errs = append(errs, err)
	}
	return nil, upstreamTarget{}, errors.Join(errs...)
}

func dialTarget(ctx context.Context, t upstreamTarget) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, t.network, t.addr)
	if err != nil {
		return nil, err
	}
	if t.tls == nil {
		return c, nil
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}); err != nil { // SSLRequest
		c.Close()
		return nil, err
	}
	var resp [1]byte
	if _, err := c.Read(resp[:]); err != nil {
		c.Close()
		return nil, err
	}
	if resp[0] != 'S' {
		c.Close()
		return nil, fmt.Errorf("%s: %w", t.addr, errUpstreamNoTLS)
	}
	tc := tls.Client(c, t.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: TLS handshake: %w", t.addr, err)
	}
	c.SetDeadline(time.Time{})
	return tc, nil
}
