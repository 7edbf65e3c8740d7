// Package wire is pgsketch's PostgreSQL protocol relay.
//
// A Server accepts PostgreSQL clients and gives each one its own upstream
// connection (session mode). The startup phase is handled message by message:
// SSLRequest (TLS ends at the proxy when configured), GSSENCRequest (refused),
// CancelRequest (forwarded to the upstream backend that owns the key), and the
// StartupMessage, which is forwarded unchanged. Authentication is relayed end
// to end (trust, password, md5, SCRAM-SHA-256); SCRAM-SHA-256-PLUS is removed
// from the mechanisms offered, because channel binding cannot cross a proxy.
// The upstream's BackendKeyData is replaced by a key of the proxy's own, so
// that cancel requests come to the proxy, which knows the session.
//
// After startup the relay copies bytes, looking only at message headers. In
// the client-to-upstream direction it reads the bodies of the messages a
// Handler may want: Query, and the extended-protocol messages Parse, Bind,
// Describe, Execute, Close, Flush and Sync. Those the Handler does not want
// go upstream as they come; from the first one it wants, the rest of the
// group is held up to Sync (or Flush) so that the Handler sees a whole
// request. Everything else (COPY data, function calls, large messages) is
// streamed without being buffered whole. In the upstream-to-client direction
// it counts ReadyForQuery messages, so it knows when the replies to
// everything forwarded have been relayed, and the replies that complete an
// extended-protocol message, so that the replies owed to messages forwarded
// ahead of a request in the same group are relayed (after a Flush of the
// proxy's own) before the Handler serves it.
//
// On Linux the steady state of a plain (non-TLS) session starts in an event
// loop (loop_linux.go): one goroutine per two GOMAXPROCS threads (at least
// one) blocks in epoll_wait on the sockets of all its sessions, in an epoll
// set of its own with the sockets taken out of Go's poller, and relays the
// Query and extended-protocol messages the Handler does not want, and
// every reply, as PgBouncer does, without a goroutine per direction to park
// and wake. At the first thing it does not do (a request the Handler wants,
// COPY from the client, a full socket, an end of stream, Shutdown) the
// session leaves the loop, and two goroutines (relay.go, client.go) carry on
// from the state it left. Once the Handler has served a request and the
// session is quiet again (nothing held or streaming, no COPY, no statement
// or portal the Handler owns), the goroutines stop where they are and give
// the session back to the loop. A loop outlives its last session by two
// seconds (until Shutdown), so that a session answered by the Handler
// statement after statement finds it running when it comes back.
//
// The Handler is the seam for pgsketch's query rewriting: wire imports
// none of rewrite, exec, refresh and proxy. A Handler says, per Query or Parse, whether
// it wants the request; a wanted request is handed to Handler.Serve once the
// upstream has answered everything sent before it, with exclusive use of the
// upstream connection (Session), so the client sees replies in request order.
// Passthrough is the Handler that wants nothing.
//
// Differences from a direct connection a client can see: the cancel secret
// in BackendKeyData; SCRAM-SHA-256-PLUS never offered; and the messages of
// an extended-protocol group from the first one the Handler wants (up to
// InspectSize bytes) reach the upstream, or the Handler, only when the
// group's Sync or Flush arrives.
package wire
