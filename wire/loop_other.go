//go:build !linux || race

package wire

// loopSet has no event loop outside Linux and in race builds: sessions
// are relayed by their goroutines from the start (relay.go).
type loopSet struct{}

func (*loopSet) relay(*session) handoff { return handoff{} }
