package status

import (
	"fmt"
	"io"
	"slices"
	"strings"
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
	Detail string
	// Plan, when Detail is empty, is the plan of a rewritten query,
	// printed into Detail only when the query is read (Snapshot): most
	// recorded queries are never shown, and printing a plan costs more
	// than answering from the cache.
	Plan    fmt.Stringer
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

// Fallback is a rollup answer that failed when it ran (its fetch statement
// raised an error, or the proxy refused what it returned): the statement was
// then answered exactly by PostgreSQL.
type Fallback struct {
	Time time.Time
	// SQL is the statement, cut to MaxSQL bytes.
	SQL    string
	Rollup string
	// Reason is the class of the failure, one of FallbackReasons.
	Reason string
	// Code is the error's SQLSTATE, "" for one the proxy raised itself;
	// Message says what failed.
	Code, Message string
}

// The classes of Fallback.Reason.
const (
	// ReasonPrivilege: the role may not read what the fetch reads
	// (SQLSTATE 42501), e.g. the rollup table.
	ReasonPrivilege = "privilege"
	// ReasonNotReady: a check in the fetch statement refused the rollup
	// (SQLSTATE 55000): its change capture is not in place, too many of
	// its buckets changed.
	ReasonNotReady = "not_ready"
	// ReasonRefused: the proxy refused the answer the rollup gave (an
	// overlap too uncertain, a plan that must see one snapshot).
	ReasonRefused = "refused"
	// ReasonData: the rollup's data could not be used (sketch bytes the
	// proxy or the hll extension cannot read; SQLSTATE class 22 or XX001).
	ReasonData = "data"
	// ReasonOther: any other error of the fetch statement.
	ReasonOther = "other"
)

// FallbackReasons lists the classes in the order the page and the metrics
// show them.
var FallbackReasons = []string{ReasonPrivilege, ReasonNotReady, ReasonRefused, ReasonData, ReasonOther}

// MaxSQL caps the query text kept per Query.
const MaxSQL = 2000

// Recorder keeps the last queries of each kind, the last fallbacks and
// the last samples, and counts them.
type Recorder struct {
	mu                  sync.Mutex
	rewritten, passed   ring[Query]
	fallbacks           ring[Fallback]
	samples             ring[Sample]
	nRewritten, nPassed int64
	// nFallbacks counts fallbacks by reason.
	nFallbacks map[string]int64
}

// NewRecorder keeps up to n queries of each kind (and n fallbacks) and m
// samples.
func NewRecorder(n, m int) *Recorder {
	return &Recorder{rewritten: newRing[Query](n), passed: newRing[Query](n), fallbacks: newRing[Fallback](n),
		samples: newRing[Sample](m), nFallbacks: map[string]int64{}}
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

// Fallback records f; a Reason not among FallbackReasons counts as
// ReasonOther.
func (r *Recorder) Fallback(f Fallback) {
	if r == nil {
		return
	}
	if len(f.SQL) > MaxSQL {
		f.SQL = f.SQL[:MaxSQL] + "…"
	}
	if !slices.Contains(FallbackReasons, f.Reason) {
		f.Reason = ReasonOther
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fallbacks.add(f)
	r.nFallbacks[f.Reason]++
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
	Fallbacks                   []Fallback
	Samples                     []Sample
	TotalRewritten, TotalPassed int64
	// FallbackCounts counts the fallbacks since start by reason, in the
	// order of FallbackReasons (every reason, counted or not);
	// TotalFallbacks is their sum.
	FallbackCounts []ReasonCount
	TotalFallbacks int64
}

// ReasonCount is the number of fallbacks of one reason.
type ReasonCount struct {
	Reason string
	N      int64
}

// Snapshot copies the recorder's contents. Plans are printed after the
// copy, outside the lock the proxy's sessions record under.
func (r *Recorder) Snapshot() Snapshot {
	s := r.copy()
	for _, qs := range [][]Query{s.Rewritten, s.Passed} {
		for i := range qs {
			if qs[i].Detail == "" && qs[i].Plan != nil {
				qs[i].Detail, qs[i].Plan = qs[i].Plan.String(), nil
			}
		}
	}
	return s
}

func (r *Recorder) copy() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Snapshot{Rewritten: r.rewritten.list(), Passed: r.passed.list(), Fallbacks: r.fallbacks.list(),
		Samples: r.samples.list(), TotalRewritten: r.nRewritten, TotalPassed: r.nPassed}
	for _, reason := range FallbackReasons {
		n := r.nFallbacks[reason]
		s.FallbackCounts = append(s.FallbackCounts, ReasonCount{reason, n})
		s.TotalFallbacks += n
	}
	return s
}

// WritePrometheus writes the recorder's counters in the Prometheus text
// exposition format (version 0.0.4): the queries answered from rollups and
// passed through, and the fallbacks by reason.
func (r *Recorder) WritePrometheus(w io.Writer) error {
	s := r.copy() // the counters: no plans to print
	var b strings.Builder
	b.WriteString("# HELP pgsketch_queries_total Statements the proxy looked at, by outcome: answered from a rollup, or passed through to PostgreSQL unchanged.\n")
	b.WriteString("# TYPE pgsketch_queries_total counter\n")
	fmt.Fprintf(&b, "pgsketch_queries_total{outcome=\"rollup\"} %d\n", s.TotalRewritten)
	fmt.Fprintf(&b, "pgsketch_queries_total{outcome=\"passed\"} %d\n", s.TotalPassed)
	b.WriteString("# HELP pgsketch_rollup_fallbacks_total Rollup answers that failed when they ran, the statement then answered exactly by PostgreSQL, by reason.\n")
	b.WriteString("# TYPE pgsketch_rollup_fallbacks_total counter\n")
	for _, c := range s.FallbackCounts {
		fmt.Fprintf(&b, "pgsketch_rollup_fallbacks_total{reason=%q} %d\n", c.Reason, c.N)
	}
	_, err := io.WriteString(w, b.String())
	return err
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
