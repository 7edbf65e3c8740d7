//go:build !linux || race

package wire

// loopSet has no event loop outside Linux and in race builds: sessions
// are relayed by their goroutines from the start (relay.go).
type loopSet struct{}

// relay returns start: the goroutines carry on from it.
func (*loopSet) relay(_ *session, start handoff) handoff { return start }

// close has no loop to end.
func (*loopSet) close() {}

// takes reports whether an event loop can relay ss.
func (*loopSet) takes(*session) bool { return false }
