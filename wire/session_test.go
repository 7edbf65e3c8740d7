package wire

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func TestExplainAuthError(t *testing.T) {
	encode := func(e *pgproto3.ErrorResponse) []byte {
		b, err := e.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cb := encode(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "08P01", Message: "SCRAM channel binding negotiation error",
		Detail: "The client supports SCRAM channel binding but thinks the server does not.  However, this server does support channel binding."})
	var got pgproto3.ErrorResponse
	if err := got.Decode(explainAuthError(cb[5:])[5:]); err != nil {
		t.Fatal(err)
	}
	if got.Hint != channelBindingHint || got.Code != "08P01" || got.Detail == "" {
		t.Fatalf("channel binding refusal relayed as %+v", got)
	}
	// Any other error goes through byte for byte.
	other := encode(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: `password authentication failed for user "alice"`})
	if b := explainAuthError(other[5:]); !bytes.Equal(b, other) {
		t.Fatalf("other error changed:\n%q\n%q", b, other)
	}
	// Undecodable bytes too.
	if b := explainAuthError([]byte("junk")); !bytes.Equal(b, appendMessage(nil, 'E', []byte("junk"))) {
		t.Fatalf("junk changed: %q", b)
	}
}
