package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Request codes of the startup phase: the first 4 bytes after the length.
const (
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104
	codeCancelRequest = 80877102
	protocolMajor3    = 3
)

// ErrProtocol marks a client or upstream that broke the protocol.
var ErrProtocol = errors.New("protocol violation")

// readStartupPacket reads one startup-phase packet (int32 length including
// itself, then the body) from r without reading past it, and returns the
// body. Packets shorter than 8 bytes or longer than limit are refused before
// anything is allocated for them.
func readStartupPacket(r io.Reader, limit int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 8 || n > limit {
		return nil, fmt.Errorf("%w: startup packet length %d outside 8..%d", ErrProtocol, n, limit)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("startup packet: %w", unexpectedEOF(err))
	}
	return body, nil
}

// startupParams parses the key/value pairs of a StartupMessage body (after
// the protocol version). The list ends with an empty key.
func startupParams(body []byte) (map[string]string, error) {
	params := map[string]string{}
	rest := body[4:]
	for {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil, fmt.Errorf("%w: startup message: unterminated parameter name", ErrProtocol)
		}
		if i == 0 {
			if len(rest) != 1 {
				return nil, fmt.Errorf("%w: startup message: bytes after the parameter list", ErrProtocol)
			}
			return params, nil
		}
		key := string(rest[:i])
		rest = rest[i+1:]
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return nil, fmt.Errorf("%w: startup message: unterminated value of %q", ErrProtocol, key)
		}
		params[key] = string(rest[:j])
		rest = rest[j+1:]
	}
}

// readMessage reads one typed message (type byte, int32 length, body) from r
// without reading past it. Bodies longer than limit are refused.
func readMessage(r io.Reader, limit int) (typ byte, body []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[1:])))
	if n < 4 || n-4 > limit {
		return 0, nil, fmt.Errorf("%w: message %q length %d outside 4..%d", ErrProtocol, hdr[0], n, limit+4)
	}
	body = make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, unexpectedEOF(err)
	}
	return hdr[0], body, nil
}

// appendMessage appends a typed message with body to dst.
func appendMessage(dst []byte, typ byte, body []byte) []byte {
	dst = append(dst, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(len(body)+4))
	return append(dst, body...)
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
