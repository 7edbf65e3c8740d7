// Package wiretest drives a wire.Handler through a scripted conversation:
// the test says which frontend messages the upstream server must receive
// and what it replies, hands the Handler a request, and compares the
// backend messages the client got with what it expects. Messages are
// compared as encoded on the wire, byte for byte, and shown in failures as
// pgproto3 renders them in JSON.
//
// A script is a list of steps run in order by a fake upstream server:
//
//	c := wiretest.New(t,
//		wiretest.Expect(&pgproto3.Parse{Name: "s", Query: "select 1"}),
//		wiretest.Expect(&pgproto3.Sync{}),
//		wiretest.Reply(&pgproto3.ParseComplete{}, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
//	)
//	err := h.Serve(ctx, req, c.Session)
//	c.WantClient(&pgproto3.ParseComplete{}, ...) // what the client got, in order
//
// The upstream fails the test on a message it did not expect, and on one
// left unsent or unread when the test ends.
package wiretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/wire"
)

// Step is one step of the upstream's script.
type Step struct {
	expect pgproto3.FrontendMessage
	reply  []pgproto3.BackendMessage
}

// Expect is a step in which the upstream receives msg.
func Expect(msg pgproto3.FrontendMessage) Step { return Step{expect: msg} }

// Reply is a step in which the upstream sends msgs.
func Reply(msgs ...pgproto3.BackendMessage) Step { return Step{reply: msgs} }

// Conn is one scripted conversation.
type Conn struct {
	// Session is what the Handler serves on.
	Session *wire.Session

	t      testing.TB
	client bytes.Buffer
	up     net.Conn
	done   chan struct{}
	mu     sync.Mutex
	errs   []string
	step   int
	steps  []Step
}

// New starts a conversation whose upstream follows steps. The test fails at
// its end if the script did not run to the last step, or if the Handler
// sent the upstream more than it expected.
func New(t testing.TB, steps ...Step) *Conn {
	t.Helper()
	handlerEnd, upEnd := net.Pipe()
	c := &Conn{t: t, up: upEnd, done: make(chan struct{}), steps: steps}
	c.Session = wire.NewSession(handlerEnd, &c.client, map[string]string{"user": "test", "database": "test"})
	go c.serve()
	t.Cleanup(func() {
		handlerEnd.Close()
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			t.Error("wiretest: the fake upstream did not stop")
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range c.errs {
			t.Error(e)
		}
		if c.step < len(c.steps) {
			t.Errorf("wiretest: the script stopped at step %d of %d: %s", c.step+1, len(c.steps), c.steps[c.step])
		}
	})
	return c
}

func (s Step) String() string {
	if s.expect != nil {
		return "expect " + Render(s.expect)
	}
	var parts []string
	for _, m := range s.reply {
		parts = append(parts, Render(m))
	}
	return "reply " + strings.Join(parts, ", ")
}

func (c *Conn) fail(format string, args ...any) {
	c.mu.Lock()
	c.errs = append(c.errs, fmt.Sprintf("wiretest: "+format, args...))
	c.mu.Unlock()
}

// serve plays the upstream's part of the script.
func (c *Conn) serve() {
	defer close(c.done)
	defer c.up.Close()
	be := pgproto3.NewBackend(c.up, c.up)
	for {
		c.mu.Lock()
		i := c.step
		c.mu.Unlock()
		if i == len(c.steps) {
			break
		}
		st := c.steps[i]
		if st.expect != nil {
			got, err := be.Receive()
			if err != nil {
				c.fail("step %d: %s: the handler sent nothing more (%v)", i+1, st, err)
				return
			}
			if !same(got, st.expect) {
				c.fail("step %d: upstream got %s, want %s", i+1, Render(got), Render(st.expect))
				return
			}
		} else {
			for _, m := range st.reply {
				be.Send(m)
			}
			if err := be.Flush(); err != nil {
				c.fail("step %d: %s: %v", i+1, st, err)
				return
			}
		}
		c.mu.Lock()
		c.step++
		c.mu.Unlock()
	}
	// Anything more is unexpected.
	if got, err := be.Receive(); err == nil {
		c.fail("after the script: upstream got %s", Render(got))
	}
}

// WantClient fails the test unless the client got exactly want since the
// last call: the same messages, byte for byte, in the same order.
func (c *Conn) WantClient(want ...pgproto3.BackendMessage) {
	c.t.Helper()
	var w []byte
	var ws []string
	for _, m := range want {
		var err error
		if w, err = m.Encode(w); err != nil {
			c.t.Fatalf("wiretest: encode %s: %v", Render(m), err)
		}
		ws = append(ws, Render(m))
	}
	got := c.client.Bytes()
	if !bytes.Equal(got, w) {
		c.t.Errorf("client got:\n\t%s\nwant:\n\t%s", strings.Join(render(got), "\n\t"), strings.Join(ws, "\n\t"))
	}
	c.client.Reset()
}

// render decodes and renders encoded backend messages.
func render(b []byte) []string {
	fe := pgproto3.NewFrontend(bytes.NewReader(b), nil)
	var out []string
	for {
		m, err := fe.Receive()
		if err != nil {
			return out
		}
		out = append(out, Render(m))
	}
}

// same reports whether two frontend messages encode alike.
func same(a, b pgproto3.FrontendMessage) bool {
	ea, err1 := a.Encode(nil)
	eb, err2 := b.Encode(nil)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

// Render is a message as pgproto3 renders it in JSON.
func Render(m any) string {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprintf("%T (unrenderable: %v)", m, err)
	}
	return string(b)
}
