package wire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Authentication request codes (the int32 after 'R').
const (
	authOK             = 0
	authCleartext      = 3
	authMD5            = 5
	authGSS            = 7
	authGSSContinue    = 8
	authSSPI           = 9
	authSASL           = 10
	authSASLContinue   = 11
	scramPlus          = "SCRAM-SHA-256-PLUS"
	maxAuthMessageSize = 1 << 16
)

// session is one client and its upstream connection.
type session struct {
	srv    *Server
	log    *slog.Logger
	params map[string]string

	// mu guards the connection fields while startup may still replace them
	// (TLS, the upstream dial) and Shutdown may close them.
	mu     sync.Mutex
	client net.Conn // becomes a *tls.Conn after SSLRequest
	up     net.Conn
	key    cancelKey // the key the client knows, 0 pid until registered
	closed bool
	// cancel ends the context a Handler serves under; set by relayLoop.
	cancel context.CancelFunc
	// leave takes the session out of the event loop and waits until the
	// loop has let go of its sockets; nil when the loop does not hold it.
	// noLoop keeps a session out of the loop once anything else is about
	// to write to or close its connections.
	leave  func()
	noLoop bool

	clientMu       sync.Mutex  // serialises writes to the client
	clientBoundary atomic.Bool // the bytes written to the client end at a message boundary
	terminating    atomic.Bool // the client said Terminate or left: upstream EOF is expected

	relay relayState
	// handlerState is the Handler's, used only on the session goroutine.
	handlerState any
	// tracker knows the statements and portals the Handler owns; used by
	// whichever side (event loop or client loop) reads the client.
	tracker statementTracker
}

func newSession(s *Server, c net.Conn) *session {
	ss := &session{srv: s, client: c, log: s.cfg.Logger.With("client", c.RemoteAddr().String()),
		tracker: statementTracker{stmts: map[string]bool{}, portals: map[string]bool{}}}
	ss.clientBoundary.Store(true)
	ss.relay.ready.Store('I')
	return ss
}

// setConn installs a connection made during startup, unless the session was
// closed meanwhile, in which case it closes c and reports errSessionDone.
func (ss *session) setConn(field *net.Conn, c net.Conn) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		c.Close()
		return errSessionDone
	}
	*field = c
	return nil
}

// errSessionDone ends a session that had nothing more to do (a cancel
// request, a client that left during startup).
var errSessionDone = errors.New("session done")

func (ss *session) run() {
	defer ss.close()
	ss.client.SetDeadline(time.Now().Add(ss.srv.cfg.StartupTimeout))
	if err := ss.startup(); err != nil {
		if !errors.Is(err, errSessionDone) {
			ss.log.Info("startup failed", "err", err)
			if !errors.Is(err, errConnectUpstream) { // counted as it happened
				ss.srv.metrics.countError(kindStartup)
			}
		}
		return
	}
	ss.client.SetDeadline(time.Time{})
	ss.up.SetDeadline(time.Time{})
	ss.log.Debug("session started", "user", ss.params["user"], "database", ss.params["database"])
	// The event loop relays the session for as long as it can (loop_linux.go);
	// the relay's goroutines take over from where it stopped.
	err := ss.steady(handoff{})
	ss.log.Debug("session ended", "err", err)
	switch {
	case errors.Is(err, ErrProtocol):
		ss.srv.metrics.countError(kindProtocol)
	case errors.Is(err, errUpstreamGone):
		ss.srv.metrics.countError(kindUpstreamLost)
	}
}

// steady relays the session from start until it ends: in the event loop
// while the loop can, in the relay's goroutines from where it stopped, and
// back in the loop when they find the session quiet after a request the
// Handler served.
func (ss *session) steady(start handoff) error {
	h := ss.srv.loops.relay(ss, start)
	for {
		next, err := ss.relayLoop(h)
		if next == nil {
			return err
		}
		h = ss.srv.loops.relay(ss, *next)
	}
}

// leaveLoop takes the session out of the event loop, if it is in one, and
// keeps it out, so that its connections may be written to and closed.
func (ss *session) leaveLoop() {
	ss.mu.Lock()
	ss.noLoop = true
	leave := ss.leave
	ss.mu.Unlock()
	if leave != nil {
		leave()
	}
}

// close closes both connections, once.
func (ss *session) close() {
	ss.leaveLoop()
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return
	}
	ss.closed = true
	client, up, key, cancel := ss.client, ss.up, ss.key, ss.cancel
	ss.mu.Unlock()
	if cancel != nil {
		cancel() // a Handler still serving gives up
	}
	if key.pid != 0 {
		ss.srv.cancels.unregister(key.pid)
	}
	client.Close()
	if up != nil {
		up.Close()
	}
	ss.relay.closeHandover()
}

// abort tells the client why (a FATAL ErrorResponse, if the bytes it got so
// far end at a message boundary) and closes the session. A writer blocked on
// a client that does not read is released first.
func (ss *session) abort(code, msg string) {
	ss.leaveLoop()
	ss.mu.Lock()
	client := ss.client
	ss.mu.Unlock()
	client.SetWriteDeadline(time.Now())
	ss.clientMu.Lock()
	if ss.clientBoundary.Load() {
		client.SetWriteDeadline(time.Now().Add(time.Second))
		client.Write(fatal(code, msg))
	}
	ss.clientMu.Unlock()
	ss.close()
}

// writeClient writes b to the client under the client write lock. boundary
// tells whether b ends at a message boundary.
func (ss *session) writeClient(b []byte, boundary bool) error {
	ss.clientMu.Lock()
	n, err := ss.client.Write(b)
	if err != nil && n > 0 {
		boundary = false
	}
	if n > 0 || err == nil {
		ss.clientBoundary.Store(boundary)
	}
	ss.clientMu.Unlock()
	return err
}

// reply writes whole messages to the client.
func (ss *session) reply(b []byte) error { return ss.writeClient(b, true) }

func (ss *session) startup() error {
	cfg := &ss.srv.cfg
	tlsDone := false
	var body []byte
	for {
		var err error
		body, err = readStartupPacket(ss.client, cfg.MaxStartupSize)
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				ss.reply(fatal(sqlstateProtocolViolation, "invalid startup packet: "+err.Error()))
				return err
			}
			if errors.Is(err, io.EOF) {
				return errSessionDone
			}
			return err
		}
		code := binary.BigEndian.Uint32(body)
		switch {
		case code == codeSSLRequest && len(body) == 4:
			if tlsDone {
				ss.reply(fatal(sqlstateProtocolViolation, "SSLRequest inside TLS"))
				return fmt.Errorf("%w: SSLRequest inside TLS", ErrProtocol)
			}
			if cfg.TLS == nil {
				if err := ss.reply([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			if err := ss.reply([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(ss.client, cfg.TLS)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("client TLS handshake: %w", err)
			}
			if err := ss.setConn(&ss.client, tc); err != nil {
				return err
			}
			tlsDone = true
		case code == codeGSSENCRequest && len(body) == 4:
			if err := ss.reply([]byte{'N'}); err != nil {
				return err
			}
		case code == codeCancelRequest:
			ss.handleCancel(body)
			return errSessionDone
		case code>>16 == protocolMajor3:
			params, err := startupParams(body)
			if err != nil {
				ss.reply(fatal(sqlstateProtocolViolation, "invalid startup packet: "+err.Error()))
				return err
			}
			ss.params = params
			return ss.authenticate(body)
		default:
			msg := fmt.Sprintf("unsupported frontend protocol %d.%d: pgsketch-proxy supports 3.x", code>>16, code&0xffff)
			ss.reply(fatal(sqlstateFeatureNotSupp, msg))
			return fmt.Errorf("%w: %s", ErrProtocol, msg)
		}
	}
}

func (ss *session) handleCancel(body []byte) {
	var req pgproto3.CancelRequest
	if err := req.Decode(body); err != nil {
		ss.log.Info("invalid cancel request", "err", err)
		return
	}
	up, ok := ss.srv.cancels.lookup(cancelKey{pid: req.ProcessID, secret: req.SecretKey})
	if !ok {
		ss.log.Info("cancel request for an unknown key")
		return
	}
	if err := ss.srv.forwardCancel(up); err != nil {
		ss.log.Warn("forward cancel request", "err", err)
		return
	}
	ss.log.Debug("cancel request forwarded")
}

// authenticate connects upstream, forwards the StartupMessage and relays the
// authentication exchange until the upstream's first ReadyForQuery.
func (ss *session) authenticate(startup []byte) error {
	up, target, err := ss.connectUpstream(startup)
	if err != nil {
		return err
	}
	var out []byte // to the client, written before we wait for it
	for {
		typ, body, err := readMessage(up, ss.srv.cfg.MaxMessageSize)
		if err != nil {
			ss.reply(out)
			return ss.upstreamLost(err)
		}
		switch typ {
		case 'R':
			out, err = ss.relayAuthRequest(up, out, body)
		case 'K':
			out, err = ss.registerCancelKey(out, body, target)
		case 'E':
			ss.reply(append(out, explainAuthError(body)...))
			return errSessionDone // the upstream refused; it closes the connection
		case 'Z':
			return ss.reply(appendMessage(out, typ, body))
		default: // ParameterStatus, NegotiateProtocolVersion, NoticeResponse
			out = appendMessage(out, typ, body)
		}
		if err != nil {
			return err
		}
	}
}

// connectUpstream dials the upstream, installs the connection and sends it
// the StartupMessage (startup, the packet without its length).
func (ss *session) connectUpstream(startup []byte) (net.Conn, upstreamTarget, error) {
	cfg := &ss.srv.cfg
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ConnectTimeout)
	t0 := time.Now()
	up, target, err := dialUpstream(ctx, ss.srv.targets, cfg.ConnectTimeout)
	cancel()
	m := &ss.srv.metrics
	if err != nil {
		m.countError(kindUpstreamConnect)
		ss.reply(fatal(sqlstateCannotConnect,
			fmt.Sprintf("pgsketch-proxy could not connect to the upstream server %s: %v", ss.srv.upstreamName, err)))
		return nil, target, fmt.Errorf("%w: %w", errConnectUpstream, err)
	}
	m.connectSeconds.observe(time.Since(t0))
	up = countedConn{rawIO(up), &m.bytesFromUpstream, &m.bytesToUpstream}
	if err := ss.setConn(&ss.up, up); err != nil {
		return nil, target, err
	}
	up.SetDeadline(time.Now().Add(cfg.StartupTimeout))
	pkt := binary.BigEndian.AppendUint32(make([]byte, 0, len(startup)+4), uint32(len(startup)+4))
	if _, err := up.Write(append(pkt, startup...)); err != nil {
		return nil, target, ss.upstreamLost(err)
	}
	return up, target, nil
}

// relayAuthRequest appends the authentication request body (an 'R'
// message) to out and, when the request asks the client for an answer,
// writes out to the client and relays the answer upstream. It returns what
// is still to be written to the client.
func (ss *session) relayAuthRequest(up net.Conn, out, body []byte) ([]byte, error) {
	if len(body) < 4 {
		return out, ss.upstreamLost(fmt.Errorf("%w: short authentication message", ErrProtocol))
	}
	sub := binary.BigEndian.Uint32(body)
	if sub == authSASL {
		var err error
		if out, err = ss.appendSASLOffer(out, body); err != nil {
			return out, err
		}
	} else {
		out = appendMessage(out, 'R', body)
	}
	switch sub {
	case authCleartext, authMD5, authGSS, authGSSContinue, authSSPI, authSASL, authSASLContinue:
		// The client answers; relay its answer.
		if err := ss.reply(out); err != nil {
			return out, err
		}
		return out[:0], ss.relayAuthAnswer(up)
	}
	return out, nil
}

// appendSASLOffer appends the upstream's AuthenticationSASL (body) to out
// without SCRAM-SHA-256-PLUS: channel binding cannot pass through a proxy
// that ends TLS. When nothing else is offered, it tells the client so and
// ends the session.
func (ss *session) appendSASLOffer(out, body []byte) ([]byte, error) {
	var sasl pgproto3.AuthenticationSASL
	if err := sasl.Decode(body); err != nil {
		return out, ss.upstreamLost(fmt.Errorf("%w: %v", ErrProtocol, err))
	}
	sasl.AuthMechanisms = slices.DeleteFunc(sasl.AuthMechanisms, func(m string) bool { return m == scramPlus })
	if len(sasl.AuthMechanisms) == 0 {
		ss.reply(append(out, fatal(sqlstateFeatureNotSupp,
			"the upstream server offers only SCRAM-SHA-256-PLUS, and channel binding cannot pass through pgsketch-proxy")...))
		return out, errSessionDone
	}
	out, _ = sasl.Encode(out)
	return out, nil
}

// relayAuthAnswer reads the client's answer to an authentication request
// and writes it upstream.
func (ss *session) relayAuthAnswer(up net.Conn) error {
	ctyp, cbody, err := readMessage(ss.client, maxAuthMessageSize)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errSessionDone // e.g. psql leaving to prompt for a password
		}
		if errors.Is(err, ErrProtocol) {
			ss.reply(fatal(sqlstateProtocolViolation, err.Error()))
		}
		return err
	}
	if _, err := up.Write(appendMessage(nil, ctyp, cbody)); err != nil {
		return ss.upstreamLost(err)
	}
	return nil
}

// registerCancelKey registers the upstream's BackendKeyData (body) under a
// key of the proxy's own, which it appends to out for the client.
func (ss *session) registerCancelKey(out, body []byte, target upstreamTarget) ([]byte, error) {
	var k pgproto3.BackendKeyData
	if err := k.Decode(body); err != nil {
		return out, ss.upstreamLost(fmt.Errorf("%w: %v", ErrProtocol, err))
	}
	key := ss.srv.cancels.register(cancelKey{pid: k.ProcessID, secret: k.SecretKey}, target)
	ss.mu.Lock()
	ss.key = key
	closed := ss.closed
	ss.mu.Unlock()
	if closed {
		ss.srv.cancels.unregister(key.pid)
		return out, errSessionDone
	}
	out, _ = (&pgproto3.BackendKeyData{ProcessID: key.pid, SecretKey: key.secret}).Encode(out)
	return out, nil
}

// upstreamLost tells the client the upstream went away and returns err.
func (ss *session) upstreamLost(err error) error {
	ss.reply(fatal(sqlstateConnectionFailure,
		fmt.Sprintf("pgsketch-proxy lost the upstream server %s: %v", ss.srv.upstreamName, err)))
	return fmt.Errorf("%w: %w", errUpstreamGone, err)
}

var (
	errConnectUpstream = errors.New("connect upstream")
	errUpstreamGone    = errors.New("upstream lost")
)

// channelBindingHint explains the one refusal the proxy itself causes: a
// client on TLS to the proxy says it could bind SCRAM to the channel but was
// not offered it (the proxy removes SCRAM-SHA-256-PLUS), and an upstream on
// TLS too refuses that as a possible downgrade.
const channelBindingHint = "pgsketch-proxy ends TLS and cannot pass SCRAM channel binding through, " +
	"so the client must not offer it: connect with channel_binding=disable, " +
	"or run the proxy's upstream connection without TLS on a trusted network"

// explainAuthError returns the upstream's ErrorResponse (body) to relay,
// with channelBindingHint added when the upstream refused SCRAM channel
// binding negotiation and gave no hint of its own.
func explainAuthError(body []byte) []byte {
	var e pgproto3.ErrorResponse
	if err := e.Decode(body); err != nil || e.Hint != "" ||
		!strings.Contains(e.Message, "SCRAM channel binding negotiation error") {
		return appendMessage(nil, 'E', body)
	}
	e.Hint = channelBindingHint
	b, err := e.Encode(nil)
	if err != nil {
		return appendMessage(nil, 'E', body)
	}
	return b
}
