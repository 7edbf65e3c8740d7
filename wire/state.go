package wire

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// relayState is shared by a session's two loops: the client loop (the
// session goroutine) and the upstream loop.
type relayState struct {
	mu sync.Mutex
	// pending holds the requests forwarded upstream whose ReadyForQuery has
	// not come back, oldest first: 'Q' (Query), 'F' (FunctionCall), 'S' (Sync).
	// Empty means the upstream has answered everything.
	pending []byte
	// copyIn: the upstream is reading COPY data; it ignores the Syncs (and
	// Flushes) it reads until CopyDone or CopyFail, so those are not pending.
	copyIn bool
	// idle: the upstream loop is between messages, waiting for bytes.
	idle bool
	// handover: a Handler owns the upstream; its bytes go to pipeW.
	handover bool
	// want: the client loop waits (on granted) for the upstream to catch up
	// so it can hand it over.
	want    atomic.Bool
	granted chan struct{}
	pipeR   *io.PipeReader
	pipeW   *io.PipeWriter
	closed  bool
	doneCh  chan struct{}
	// ready counts the upstream's ReadyForQuery messages (high bits) and
	// holds the status byte of the last one (low 8 bits); written only by
	// the upstream loop.
	ready atomic.Uint64
	// replies counts the upstream's replies that complete an
	// extended-protocol message (see completes) relayed to the client
	// since the last ReadyForQuery or handover; failed says an
	// ErrorResponse came since the last ReadyForQuery, so the upstream
	// skips what it reads up to Sync. Written by the side reading the
	// upstream; the client side reads them once it holds the handover.
	replies atomic.Int64
	failed  atomic.Bool
	// leaving asks the upstream loop to stop where it is (a read deadline
	// in the past wakes it), so that the session can go back to the event
	// loop; it then leaves its walk of the upstream's messages in left.
	leaving atomic.Bool
	left    upScan
}

// completes reports whether an upstream message of type typ is the last
// reply to one extended-protocol message: ParseComplete, BindComplete,
// CloseComplete, NoData, RowDescription (a Describe of a statement sends
// ParameterDescription first), CommandComplete, EmptyQueryResponse or
// PortalSuspended.
func completes(typ byte) bool {
	switch typ {
	case '1', '2', '3', 'n', 'T', 'C', 'I', 's':
		return true
	}
	return false
}

// replied records an upstream message of type typ for the counts of
// replies; relayed says it goes to the client rather than to a Handler.
func (rs *relayState) replied(typ byte, relayed bool) {
	switch {
	case typ == 'Z':
		rs.replies.Store(0)
		rs.failed.Store(false)
	case typ == 'E':
		rs.failed.Store(true)
	case relayed && completes(typ):
		rs.replies.Add(1)
	}
}

// forwarded records a request written upstream that ReadyForQuery will answer.
func (rs *relayState) forwarded(kind byte) {
	rs.mu.Lock()
	if kind != 'S' || !rs.copyIn {
		rs.pending = append(rs.pending, kind)
	}
	rs.mu.Unlock()
}

// copyEnded records a CopyDone or CopyFail written upstream.
func (rs *relayState) copyEnded() {
	rs.mu.Lock()
	rs.copyIn = false
	rs.mu.Unlock()
}

// answeredLocked records a ReadyForQuery from the upstream, which is also
// never sent during a COPY.
func (rs *relayState) answeredLocked() {
	rs.copyIn = false
	if len(rs.pending) > 0 {
		rs.pending = rs.pending[:copy(rs.pending, rs.pending[1:])]
	}
}

// copyStartedLocked records CopyInResponse or CopyBothResponse. Every Sync
// still pending was written after the command that started the COPY (the
// ReadyForQuery of earlier ones comes before this message), so the upstream
// reads them during the COPY and ignores them.
func (rs *relayState) copyStartedLocked() {
	rs.copyIn = true
	k := 0
	for _, kind := range rs.pending {
		if kind != 'S' {
			rs.pending[k] = kind
			k++
		}
	}
	rs.pending = rs.pending[:k]
}

// errHandoverDone closes a handover pipe when the Handler returns.
var errHandoverDone = errors.New("handover done")

// errNotCaughtUp: the upstream did not answer everything forwarded within
// the wait; the request goes upstream unseen instead.
var errNotCaughtUp = errors.New("upstream still busy")

// acquire waits until the upstream has answered everything forwarded, then
// switches the upstream loop to hand its bytes to a pipe, whose reader it
// returns. It gives up after wait with errNotCaughtUp.
func (rs *relayState) acquire(ctx context.Context, wait time.Duration) (*io.PipeReader, error) {
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		return nil, errSessionClosed
	}
	rs.pipeR, rs.pipeW = io.Pipe()
	pr := rs.pipeR
	if len(rs.pending) == 0 && rs.idle {
		rs.handover = true
		rs.mu.Unlock()
		return pr, nil
	}
	rs.granted = make(chan struct{})
	g := rs.granted
	rs.want.Store(true)
	rs.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var giveUp error
	select {
	case <-g:
		return pr, nil
	case <-rs.done():
		return nil, errSessionClosed
	case <-ctx.Done():
		giveUp = ctx.Err()
	case <-timer.C:
		giveUp = errNotCaughtUp
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.handover { // granted just now
		return pr, nil
	}
	rs.want.Store(false)
	pr.Close()
	return nil, giveUp
}

// canGrantLocked reports whether a wanted handover may happen now.
func (rs *relayState) canGrantLocked() bool {
	return rs.want.Load() && len(rs.pending) == 0
}

// grantLocked hands the upstream over and returns the pipe to write to.
func (rs *relayState) grantLocked() *io.PipeWriter {
	rs.want.Store(false)
	rs.handover = true
	close(rs.granted)
	return rs.pipeW
}

// release gives the upstream back to the relay.
func (rs *relayState) release() {
	rs.mu.Lock()
	rs.handover = false
	rs.replies.Store(0) // the Handler read every reply it was owed
	pr := rs.pipeR
	rs.mu.Unlock()
	if pr != nil {
		pr.CloseWithError(errHandoverDone)
	}
}

// done returns a channel closed when the session closes.
func (rs *relayState) done() chan struct{} {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.doneCh == nil {
		rs.doneCh = make(chan struct{})
		if rs.closed {
			close(rs.doneCh)
		}
	}
	return rs.doneCh
}

func (rs *relayState) closeHandover() {
	rs.mu.Lock()
	if !rs.closed && rs.doneCh != nil {
		close(rs.doneCh)
	}
	rs.closed = true
	pr, pw := rs.pipeR, rs.pipeW
	rs.mu.Unlock()
	if pr != nil {
		pr.CloseWithError(errSessionClosed)
		pw.CloseWithError(errSessionClosed)
	}
}

var errSessionClosed = errors.New("session closed")
