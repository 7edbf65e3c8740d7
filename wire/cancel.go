package wire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// cancelKey is what a client presents in a CancelRequest.
type cancelKey struct {
	pid    uint32
	secret []byte
}

// cancelRegistry maps the keys the proxy hands to clients to the upstream
// backends' own keys and the upstream each backend lives on.
//
// The proxy keeps the backend's PID (so pg_backend_pid(), the PID in
// NotificationResponse and pg_stat_activity agree with what the client was
// told) and replaces only the secret. Should two sessions' backends share a
// PID (two upstream hosts), the later one gets a random PID instead.
type cancelRegistry struct {
	mu   sync.Mutex
	keys map[uint32]cancelEntry
}

type cancelEntry struct {
	secret   []byte
	upstream cancelKey
	target   upstreamTarget
}

// register makes a proxy key for an upstream key, with a secret of the same
// length (4 bytes for protocol 3.0, longer ones under 3.2).
func (r *cancelRegistry) register(up cancelKey, target upstreamTarget) cancelKey {
	secret := make([]byte, len(up.secret))
	rand.Read(secret)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[uint32]cancelEntry{}
	}
	pid := up.pid
	for _, taken := r.keys[pid]; taken || pid == 0; _, taken = r.keys[pid] {
		var b [4]byte
		rand.Read(b[:])
		pid = binary.BigEndian.Uint32(b[:]) &^ (1 << 31) // positive, as PIDs are
	}
	r.keys[pid] = cancelEntry{secret: secret, upstream: up, target: target}
	return cancelKey{pid: pid, secret: secret}
}

func (r *cancelRegistry) unregister(pid uint32) {
	r.mu.Lock()
	delete(r.keys, pid)
	r.mu.Unlock()
}

// lookup returns the upstream key and target for a proxy key, comparing the
// secret in constant time.
func (r *cancelRegistry) lookup(k cancelKey) (cancelEntry, bool) {
	r.mu.Lock()
	e, ok := r.keys[k.pid]
	r.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare(e.secret, k.secret) != 1 {
		return cancelEntry{}, false
	}
	return e, true
}

// forwardCancel sends a CancelRequest for the backend of e to the upstream
// it lives on, on a connection of its own as PostgreSQL expects, and closes it.
func (s *Server) forwardCancel(e cancelEntry) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ConnectTimeout)
	defer cancel()
	c, _, err := dialUpstream(ctx, []upstreamTarget{e.target}, s.cfg.ConnectTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	msg, err := (&pgproto3.CancelRequest{ProcessID: e.upstream.pid, SecretKey: e.upstream.secret}).Encode(nil)
	if err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(s.cfg.ConnectTimeout))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	// The server closes the connection once it has read the request; wait for
	// that so the cancel is delivered before we report success.
	var b [1]byte
	c.Read(b[:])
	return nil
}
