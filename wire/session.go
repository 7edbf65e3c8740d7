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
	client net.Conn // becomes a *tls.Conn after SSLRequest
	up     net.Conn
	params map[string]string
	key    cancelKey // the key the client knows, 0 pid until registered

	clientMu    sync.Mutex // serialises writes to the client
	closeOnce   sync.Once
	terminating atomic.Bool // the client said Terminate or left: upstream EOF is expected

	relay relayState
}

func newSession(s *Server, c net.Conn) *session {
	return &session{srv: s, client: c, log: s.cfg.Logger.With("client", c.RemoteAddr().String())}
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
		}
		return
	}
	ss.client.SetDeadline(time.Time{})
	ss.up.SetDeadline(time.Time{})
	ss.log.Debug("session started", "user", ss.params["user"], "database", ss.params["database"])
	err := ss.relayLoop()
	ss.log.Debug("session ended", "err", err)
}

// close closes both connections, once.
func (ss *session) close() {
	ss.closeOnce.Do(func() {
		if ss.key.pid != 0 {
			ss.srv.cancels.unregister(ss.key.pid)
		}
		ss.client.Close()
		if ss.up != nil {
			ss.up.Close()
		}
		ss.relay.closeHandover()
	})
}

// abort tells the client why (FATAL) and closes the session.
func (ss *session) abort(code, msg string) {
	ss.clientMu.Lock()
	ss.client.SetWriteDeadline(time.Now().Add(time.Second))
	ss.client.Write(fatal(code, msg))
	ss.clientMu.Unlock()
	ss.close()
}

// writeClient writes b to the client under the client write lock.
func (ss *session) writeClient(b []byte) error {
	ss.clientMu.Lock()
	_, err := ss.client.Write(b)
	ss.clientMu.Unlock()
	return err
}

func (ss *session) startup() error {
	cfg := &ss.srv.cfg
	tlsDone := false
	var body []byte
	for {
		var err error
		body, err = readStartupPacket(ss.client, cfg.MaxStartupSize)
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				ss.writeClient(fatal(sqlstateProtocolViolation, "invalid startup packet: "+err.Error()))
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
				ss.writeClient(fatal(sqlstateProtocolViolation, "SSLRequest inside TLS"))
				return fmt.Errorf("%w: SSLRequest inside TLS", ErrProtocol)
			}
			if cfg.TLS == nil {
				if err := ss.writeClient([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			if err := ss.writeClient([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(ss.client, cfg.TLS)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("client TLS handshake: %w", err)
			}
			ss.client, tlsDone = tc, true
		case code == codeGSSENCRequest && len(body) == 4:
			if err := ss.writeClient([]byte{'N'}); err != nil {
				return err
			}
		case code == codeCancelRequest:
			ss.handleCancel(body)
			return errSessionDone
		case code>>16 == protocolMajor3:
			params, err := startupParams(body)
			if err != nil {
				ss.writeClient(fatal(sqlstateProtocolViolation, "invalid startup packet: "+err.Error()))
				return err
			}
			ss.params = params
			return ss.authenticate(body)
		default:
			msg := fmt.Sprintf("unsupported frontend protocol %d.%d: pgsketch-proxy supports 3.x", code>>16, code&0xffff)
			ss.writeClient(fatal(sqlstateFeatureNotSupp, msg))
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
	cfg := &ss.srv.cfg
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ConnectTimeout)
	up, err := dialUpstream(ctx, ss.srv.targets, cfg.ConnectTimeout)
	cancel()
	if err != nil {
		ss.writeClient(fatal(sqlstateCannotConnect,
			fmt.Sprintf("pgsketch-proxy could not connect to the upstream server %s: %v", ss.srv.upstreamName, err)))
		return fmt.Errorf("connect upstream: %w", err)
	}
	ss.up = up
	up.SetDeadline(time.Now().Add(cfg.StartupTimeout))
	pkt := binary.BigEndian.AppendUint32(make([]byte, 0, len(startup)+4), uint32(len(startup)+4))
	if _, err := up.Write(append(pkt, startup...)); err != nil {
		return ss.upstreamLost(err)
	}
	var out []byte // to the client, written before we wait for it
	for {
		typ, body, err := readMessage(up, cfg.MaxMessageSize)
		if err != nil {
			ss.writeClient(out)
			return ss.upstreamLost(err)
		}
		switch typ {
		case 'R':
			if len(body) < 4 {
				return ss.upstreamLost(fmt.Errorf("%w: short authentication message", ErrProtocol))
			}
			sub := binary.BigEndian.Uint32(body)
			if sub == authSASL {
				var sasl pgproto3.AuthenticationSASL
				if err := sasl.Decode(body); err != nil {
					return ss.upstreamLost(fmt.Errorf("%w: %v", ErrProtocol, err))
				}
				sasl.AuthMechanisms = slices.DeleteFunc(sasl.AuthMechanisms, func(m string) bool { return m == scramPlus })
				if len(sasl.AuthMechanisms) == 0 {
					ss.writeClient(append(out, fatal(sqlstateFeatureNotSupp,
						"the upstream server offers only SCRAM-SHA-256-PLUS, and channel binding cannot pass through pgsketch-proxy")...))
					return errSessionDone
				}
				out, _ = sasl.Encode(out)
			} else {
				out = appendMessage(out, typ, body)
			}
			switch sub {
			case authCleartext, authMD5, authGSS, authGSSContinue, authSSPI, authSASL, authSASLContinue:
				// The client answers; relay its answer.
				if err := ss.writeClient(out); err != nil {
					return err
				}
				out = out[:0]
				ctyp, cbody, err := readMessage(ss.client, maxAuthMessageSize)
				if err != nil {
					if errors.Is(err, io.EOF) {
						return errSessionDone // e.g. psql leaving to prompt for a password
					}
					if errors.Is(err, ErrProtocol) {
						ss.writeClient(fatal(sqlstateProtocolViolation, err.Error()))
					}
					return err
				}
				if _, err := up.Write(appendMessage(nil, ctyp, cbody)); err != nil {
					return ss.upstreamLost(err)
				}
			}
		case 'K':
			var k pgproto3.BackendKeyData
			if err := k.Decode(body); err != nil {
				return ss.upstreamLost(fmt.Errorf("%w: %v", ErrProtocol, err))
			}
			ss.key = ss.srv.cancels.register(cancelKey{pid: k.ProcessID, secret: k.SecretKey})
			out, _ = (&pgproto3.BackendKeyData{ProcessID: ss.key.pid, SecretKey: ss.key.secret}).Encode(out)
		case 'E':
			ss.writeClient(appendMessage(out, typ, body))
			return errSessionDone // the upstream refused; it closes the connection
		case 'Z':
			return ss.writeClient(appendMessage(out, typ, body))
		default: // ParameterStatus, NegotiateProtocolVersion, NoticeResponse
			out = appendMessage(out, typ, body)
		}
	}
}

// upstreamLost tells the client the upstream went away and returns err.
func (ss *session) upstreamLost(err error) error {
	ss.writeClient(fatal(sqlstateConnectionFailure,
		fmt.Sprintf("pgsketch-proxy lost the upstream server %s: %v", ss.srv.upstreamName, err)))
	return fmt.Errorf("upstream: %w", err)
}
