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
// backends' own keys.
type cancelRegistry struct {
	mu   sync.Mutex
	keys map[uint32]cancelEntry
}

type cancelEntry struct {
	secret   []byte
	upstream cancelKey
}

// register makes a proxy key for an upstream key, with a secret of the same
// length (4 bytes for protocol 3.0, longer ones under 3.2).
func (r *cancelRegistry) register(up cancelKey) cancelKey {
	secret := make([]byte, len(up.secret))
	rand.Read(secret)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[uint32]cancelEntry{}
	}
	var pid uint32
	for {
		var b [4]byte
		rand.Read(b[:])
		pid = binary.BigEndian.Uint32(b[:]) &^ (1 << 31) // positive, as PIDs are
		if _, taken := r.keys[pid]; !taken && pid != 0 {
			break
		}
	}
	r.keys[pid] = cancelEntry{secret: secret, upstream: up}
	return cancelKey{pid: pid, secret: secret}
}

func (r *cancelRegistry) unregister(pid uint32) {
	r.mu.Lock()
	delete(r.keys, pid)
	r.mu.Unlock()
}

// lookup returns the upstream key for a proxy key, comparing the secret in
// constant time.
func (r *cancelRegistry) lookup(k cancelKey) (cancelKey, bool) {
	r.mu.Lock()
	e, ok := r.keys[k.pid]
	r.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare(e.secret, k.secret) != 1 {
		return cancelKey{}, false
	}
	return e.upstream, true
}

// forwardCancel sends a CancelRequest for up to the upstream on a connection
// of its own, as PostgreSQL expects, and closes it.
func (s *Server) forwardCancel(up cancelKey) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ConnectTimeout)
	defer cancel()
	c, err := dialUpstream(ctx, s.targets, s.cfg.ConnectTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	msg, err := (&pgproto3.CancelRequest{ProcessID: up.pid, SecretKey: up.secret}).Encode(nil)
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
