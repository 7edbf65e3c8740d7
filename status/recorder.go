package status

import (
	"sync"
	"time"
)

// Query is one query the proxy looked at.
type Query struct {
	Time time.Time
	// SQL is the query text, cut to MaxSQL bytes.
	SQL string
	// Rewritten reports an answer from a rollup; otherwise the query went to
	// PostgreSQL unchanged.
	Rewritten bool
	Rollup    string
	// Detail is the plan of a rewritten query or the reason for a
	// passthrough.
	Detail  string
	Latency time.Duration
	// Err is the error the client got, if any.
	Err string
}

// Sample is one distinct count computed both exactly and from a rollup.
type Sample struct {
	Time          time.Time
	Rollup        string
	Exact, Approx float64
	// StdErr is the sketch's relative standard error (1.04/√m).
	StdErr float64
}

// MaxSQL caps the query text kept per Query.
const MaxSQL = 2000

// Recorder keeps the last queries of each kind and the last samples.
type Recorder struct {
	mu                  sync.Mutex
	rewritten, passed   ring[Query]
	samples             ring[Sample]
	nRewritten, nPassed int64
}

// NewRecorder keeps up to n queries of each kind and m samples.
func NewRecorder(n, m int) *Recorder {
	return &Recorder{rewritten: newRing[Query](n), passed: newRing[Query](n), samples: newRing[Sample](m)}
}

// Query records q.
func (r *Recorder) Query(q Query) {
	if r == nil {
		return
	}
	if len(q.SQL) > MaxSQL {
		q.SQL = q.SQL[:MaxSQL] + "…"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if q.Rewritten {
		r.rewritten.add(q)
		r.nRewritten++
	} else {
		r.passed.add(q)
		r.nPassed++
	}
}

// Sample records s.
func (r *Recorder) Sample(s Sample) {
	if r == nil || s.Exact <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples.add(s)
}

// Snapshot is a copy of what a Recorder holds, newest first.
type Snapshot struct {
	Rewritten, Passed           []Query
	Samples                     []Sample
	TotalRewritten, TotalPassed int64
}

// Snapshot copies the recorder's contents.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Snapshot{Rewritten: r.rewritten.list(), Passed: r.passed.list(), Samples: r.samples.list(),
		TotalRewritten: r.nRewritten, TotalPassed: r.nPassed}
}

// ring is a fixed-size buffer of the last values added.
type ring[T any] struct {
	buf  []T
	next int
	full bool
}

func newRing[T any](n int) ring[T] { return ring[T]{buf: make([]T, max(n, 1))} }

func (r *ring[T]) add(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// list returns the values, newest first.
func (r *ring[T]) list() []T {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]T, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}
