package proxy

import (
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The extended-protocol machine's replies: what it sends upstream or
// answers itself is queued as entries, in the order of the client's
// messages, and drain sends the upstream's share and reads the replies
// back in that order, relaying them or keeping them, and the proxy's own
// messages in between.

// entry is one pending reply to read (or, local, to send) in order.
type entry struct {
	kind byte // 'P','B','S'(Describe statement),'D'(Describe portal),'E','C','Y'(Sync), 0: local
	// relay: pass the replies to the client; else they are the proxy's.
	relay bool
	// relayErr: an ErrorResponse goes to the client even if !relay.
	relayErr bool
	// local messages, built when the entry's turn comes.
	local func() []pgproto3.BackendMessage
	// localErr: the local messages are an error: discard from here.
	localErr bool
	// onReply sees the replies of an entry that is not relayed.
	onReply func(pgproto3.BackendMessage)
	// onError runs when the entry fails.
	onError func()
	// names to restore in error messages: upstream name → client's.
	upName, clientName string
}

// upstream queues msg for the upstream and e for its replies.
func (x *extRequest) upstream(e entry, msg pgproto3.FrontendMessage) {
	x.s.Frontend.Send(msg)
	x.queue = append(x.queue, e)
}

// local queues messages for the client, in order with the upstream's.
func (x *extRequest) local(f func() []pgproto3.BackendMessage) {
	x.queue = append(x.queue, entry{local: f})
}

// localError queues an error the proxy raises (hint may be empty), and
// makes the upstream fail too so that its transaction ends as PostgreSQL's
// would.
func (x *extRequest) localError(code, msg, hint string) {
	x.queue = append(x.queue, entry{localErr: true, local: func() []pgproto3.BackendMessage {
		return []pgproto3.BackendMessage{&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: msg, Hint: hint}}
	}})
	x.upstream(entry{kind: 'D'}, &pgproto3.Describe{ObjectType: 'P', Name: poisonPortal})
	x.es.discarding = true // for the rest of this request's messages
}

// sync ends the request's group: Sync upstream, its ReadyForQuery to the
// client.
func (x *extRequest) sync() error {
	x.upstream(entry{kind: 'Y', relay: true}, &pgproto3.Sync{})
	return x.drain(true)
}

// drain sends what is queued upstream (with Flush unless a Sync ends it)
// and reads the replies in order, relaying them.
func (x *extRequest) drain(synced bool) error {
	es := x.es
	upstream := false
	for _, e := range x.queue {
		if e.local == nil {
			upstream = true
		}
	}
	if upstream {
		if !synced {
			x.s.Frontend.Send(&pgproto3.Flush{})
		}
		if err := x.s.Frontend.Flush(); err != nil {
			return err
		}
	}
	queue := x.queue
	x.queue = nil
	// discarding is re-derived while the replies are read: the messages
	// queued before an error were all sent.
	discarding := false
	for _, e := range queue {
		if e.local != nil {
			if !discarding {
				for _, m := range e.local() {
					if err := x.s.Send(m); err != nil {
						return err
					}
				}
				if e.localErr {
					discarding = true
				}
			}
			continue
		}
		if x.upErr && e.kind != 'Y' {
			continue // the upstream skips it
		}
		if err := x.read(e, &discarding); err != nil {
			return err
		}
	}
	es.discarding = es.discarding || discarding
	if synced {
		es.discarding = false
		es.dirty = false
		x.upErr = false
		if es.txStatus == 'I' {
			clear(es.portals)
		}
	}
	return x.s.Flush()
}

// read reads the replies to one upstream entry.
func (x *extRequest) read(e entry, discarding *bool) error {
	for {
		msg, err := x.s.Frontend.Receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.NoticeResponse, *pgproto3.ParameterStatus, *pgproto3.NotificationResponse:
			if err := x.s.Send(msg); err != nil {
				return err
			}
			continue
		case *pgproto3.ErrorResponse:
			x.upErr = true
			if e.onError != nil {
				e.onError()
			}
			if (e.relay || e.relayErr) && !*discarding {
				if e.upName != "" {
					m.Message = strings.ReplaceAll(m.Message, `"`+e.upName+`"`, `"`+e.clientName+`"`)
				}
				if err := x.s.Send(m); err != nil {
					return err
				}
			}
			*discarding = true
			if e.kind == 'Y' {
				continue // its ReadyForQuery follows
			}
			return nil
		case *pgproto3.CopyInResponse:
			// The client cannot send COPY data in the middle of a
			// request the proxy serves: fail the COPY.
			x.s.Frontend.Send(&pgproto3.CopyFail{Message: "pgsketch-proxy: COPY FROM STDIN cannot be mixed with statements the proxy answers in one request"})
			if err := x.s.Frontend.Flush(); err != nil {
				return err
			}
			continue
		case *pgproto3.ReadyForQuery:
			x.es.txStatus = m.TxStatus
			x.upErr = false
			if e.kind != 'Y' {
				return errProtocol
			}
			return x.s.Send(msg)
		}
		if e.relay && !*discarding {
			if err := x.s.Send(msg); err != nil {
				return err
			}
		} else if e.onReply != nil {
			e.onReply(msg)
		}
		switch msg.(type) {
		case *pgproto3.ParseComplete, *pgproto3.BindComplete, *pgproto3.CloseComplete, *pgproto3.NoData,
			*pgproto3.RowDescription, *pgproto3.CommandComplete, *pgproto3.EmptyQueryResponse, *pgproto3.PortalSuspended:
			if e.kind != 'Y' {
				return nil
			}
		}
	}
}
