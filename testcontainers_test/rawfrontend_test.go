package e2e

// A raw PostgreSQL frontend on pgproto3 for tests that must see every backend
// message: the differential test and the SCRAM test. It does the startup
// itself (SSLRequest when asked, StartupMessage, authentication by cleartext
// password, MD5 or SCRAM-SHA-256 without channel binding) and records each
// backend message as its encoded bytes at once, because pgproto3 hands out
// flyweights that the next Receive overwrites.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rawTarget is where and as whom a rawConn connects.
type rawTarget struct {
	Addr     string // host:port
	User     string
	Password string
	Database string
	TLS      *tls.Config // nil: no SSLRequest
	// RequireTLS makes a refused SSLRequest ('N') an error.
	RequireTLS bool
	// Params are extra StartupMessage parameters (server settings,
	// application_name).
	Params map[string]string
}

// targetFromDSN builds a rawTarget from a connection string as pgconn reads
// it (URL or key=value). TLS is requested when the DSN's sslmode asks for it.
func targetFromDSN(dsn string) (rawTarget, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return rawTarget{}, err
	}
	t := rawTarget{
		Addr:     net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		User:     cfg.User,
		Password: cfg.Password,
		Database: cfg.Database,
		TLS:      cfg.TLSConfig,
	}
	if len(cfg.Fallbacks) == 0 && cfg.TLSConfig != nil {
		t.RequireTLS = true // sslmode=require or stricter: no plain fallback
	}
	return t, nil
}

// rawConn is one frontend connection with its recorded startup.
type rawConn struct {
	conn net.Conn
	fe   *pgproto3.Frontend
	// Startup holds the encoded backend messages from the first
	// authentication request up to and including the first ReadyForQuery.
	Startup [][]byte
	// SASLMechanisms are those the server offered in AuthenticationSASL
	// (nil when it asked for no SASL).
	SASLMechanisms []string
	TLS            bool
}

// dialRaw connects and runs the startup. A server ErrorResponse during
// startup is returned as *pgconn.PgError. When the startup fails after the
// connection was made, the returned rawConn is closed but not nil: it holds
// what the server sent (Startup, SASLMechanisms).
func dialRaw(ctx context.Context, t rawTarget) (*rawConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", t.Addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	nc.SetDeadline(deadline)
	c := &rawConn{conn: nc}
	if err := c.startup(t); err != nil {
		c.conn.Close()
		return c, err
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

func (c *rawConn) startup(t rawTarget) error {
	if t.TLS != nil {
		req, _ := (&pgproto3.SSLRequest{}).Encode(nil)
		if _, err := c.conn.Write(req); err != nil {
			return fmt.Errorf("send SSLRequest: %w", err)
		}
		var b [1]byte
		if _, err := io.ReadFull(c.conn, b[:]); err != nil {
			return fmt.Errorf("read SSLRequest answer: %w", err)
		}
		switch b[0] {
		case 'S':
			tc := tls.Client(c.conn, t.TLS)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("TLS handshake: %w", err)
			}
			c.conn, c.TLS = tc, true
		case 'N':
			if t.RequireTLS {
				return errors.New("server refused TLS (answered 'N' to SSLRequest)")
			}
		default:
			return fmt.Errorf("server answered SSLRequest with %q", b[0])
		}
	}
	c.fe = pgproto3.NewFrontend(c.conn, c.conn)
	params := map[string]string{"user": t.User, "database": t.Database}
	for k, v := range t.Params {
		params[k] = v
	}
	c.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: params})
	if err := c.fe.Flush(); err != nil {
		return fmt.Errorf("send StartupMessage: %w", err)
	}
	var scram *scramClient
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			return fmt.Errorf("startup: %w", err)
		}
		raw, err := msg.Encode(nil)
		if err != nil {
			return err
		}
		c.Startup = append(c.Startup, raw)
		switch m := msg.(type) {
		case *pgproto3.AuthenticationCleartextPassword:
			c.fe.Send(&pgproto3.PasswordMessage{Password: t.Password})
		case *pgproto3.AuthenticationMD5Password:
			c.fe.Send(&pgproto3.PasswordMessage{Password: md5Password(t.User, t.Password, m.Salt)})
		case *pgproto3.AuthenticationSASL:
			c.SASLMechanisms = append([]string(nil), m.AuthMechanisms...)
			if !contains(m.AuthMechanisms, "SCRAM-SHA-256") {
				return fmt.Errorf("server offers SASL mechanisms %v, none of which this client speaks", m.AuthMechanisms)
			}
			scram = newSCRAMClient(t.Password)
			c.fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: scram.first()})
		case *pgproto3.AuthenticationSASLContinue:
			if scram == nil {
				return errors.New("AuthenticationSASLContinue without AuthenticationSASL")
			}
			final, err := scram.final(m.Data)
			if err != nil {
				return err
			}
			c.fe.Send(&pgproto3.SASLResponse{Data: final})
		case *pgproto3.AuthenticationSASLFinal:
			if scram == nil || !scram.verify(m.Data) {
				return errors.New("SCRAM: the server's signature does not verify")
			}
			continue
		case *pgproto3.ErrorResponse:
			return pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			return nil
		default:
			continue
		}
		if err := c.fe.Flush(); err != nil {
			return err
		}
	}
}

// Close sends Terminate and closes the connection.
func (c *rawConn) Close() {
	c.fe.Send(&pgproto3.Terminate{})
	c.fe.Flush()
	c.conn.Close()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func md5Password(user, password string, salt [4]byte) string {
	h := md5.Sum([]byte(password + user))
	inner := hex.EncodeToString(h[:])
	h = md5.Sum(append([]byte(inner), salt[:]...))
	return "md5" + hex.EncodeToString(h[:])
}

// scramClient is SCRAM-SHA-256 (RFC 5802, RFC 7677) without channel binding,
// as PostgreSQL speaks it: the user name is taken from the startup message,
// so the client sends an empty one.
type scramClient struct {
	password, clientNonce, clientFirstBare string
	serverSignature                        []byte
}

func newSCRAMClient(password string) *scramClient {
	b := make([]byte, 18)
	rand.Read(b)
	s := &scramClient{password: password, clientNonce: base64.RawStdEncoding.EncodeToString(b)}
	s.clientFirstBare = "n=,r=" + s.clientNonce
	return s
}

func (s *scramClient) first() []byte { return []byte("n,," + s.clientFirstBare) }

func (s *scramClient) final(serverFirst []byte) ([]byte, error) {
	var nonce, salt string
	iter := 0
	for _, part := range strings.Split(string(serverFirst), ",") {
		switch {
		case strings.HasPrefix(part, "r="):
			nonce = part[2:]
		case strings.HasPrefix(part, "s="):
			salt = part[2:]
		case strings.HasPrefix(part, "i="):
			iter, _ = strconv.Atoi(part[2:])
		}
	}
	saltBytes, err := base64.StdEncoding.DecodeString(salt)
	if err != nil || !strings.HasPrefix(nonce, s.clientNonce) || iter <= 0 {
		return nil, fmt.Errorf("SCRAM: bad server-first-message %q", serverFirst)
	}
	salted, err := pbkdf2.Key(sha256.New, s.password, saltBytes, iter, sha256.Size)
	if err != nil {
		return nil, err
	}
	clientKey := hmacSHA256(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	withoutProof := "c=biws,r=" + nonce
	authMessage := s.clientFirstBare + "," + string(serverFirst) + "," + withoutProof
	sig := hmacSHA256(storedKey[:], authMessage)
	proof := make([]byte, len(clientKey))
	for i := range clientKey {
		proof[i] = clientKey[i] ^ sig[i]
	}
	s.serverSignature = hmacSHA256(hmacSHA256(salted, "Server Key"), authMessage)
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

func (s *scramClient) verify(serverFinal []byte) bool {
	v, ok := strings.CutPrefix(string(serverFinal), "v=")
	if !ok {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(v)
	return err == nil && hmac.Equal(got, s.serverSignature)
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// decodeBackend decodes one encoded backend message (type byte, length,
// body) into a message of its own.
func decodeBackend(raw []byte) (pgproto3.BackendMessage, error) {
	return pgproto3.NewFrontend(bytes.NewReader(raw), io.Discard).Receive()
}

// describeBackend renders an encoded backend message for failure output.
func describeBackend(raw []byte) string {
	msg, err := decodeBackend(raw)
	if err != nil {
		return fmt.Sprintf("undecodable %q: %v", raw, err)
	}
	switch m := msg.(type) {
	case *pgproto3.ErrorResponse:
		return describeError("ErrorResponse", (*pgproto3.ErrorResponse)(m))
	case *pgproto3.NoticeResponse:
		return describeError("NoticeResponse", (*pgproto3.ErrorResponse)(m))
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Sprintf("%T %q", msg, raw)
	}
	return string(b)
}

// describeError renders the fields an ErrorResponse or NoticeResponse has,
// leaving out the empty ones.
func describeError(typ string, e *pgproto3.ErrorResponse) string {
	var b strings.Builder
	b.WriteString(`{"Type":"` + typ + `"`)
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, ",%q:%q", k, v)
		}
	}
	addInt := func(k string, v int32) {
		if v != 0 {
			fmt.Fprintf(&b, ",%q:%d", k, v)
		}
	}
	add("Severity", e.Severity)
	add("SeverityUnlocalized", e.SeverityUnlocalized)
	add("Code", e.Code)
	add("Message", e.Message)
	add("Detail", e.Detail)
	add("Hint", e.Hint)
	addInt("Position", e.Position)
	addInt("InternalPosition", e.InternalPosition)
	add("InternalQuery", e.InternalQuery)
	add("Where", e.Where)
	add("SchemaName", e.SchemaName)
	add("TableName", e.TableName)
	add("ColumnName", e.ColumnName)
	add("DataTypeName", e.DataTypeName)
	add("ConstraintName", e.ConstraintName)
	add("File", e.File)
	addInt("Line", e.Line)
	add("Routine", e.Routine)
	for k, v := range e.UnknownFields {
		add(string(k), v)
	}
	b.WriteString("}")
	return b.String()
}
