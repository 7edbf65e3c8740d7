package status

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Refresher is the background refresher's state, as the page and the
// metrics show it.
type Refresher struct {
	// Refreshing: it refreshes at least one rollup. Note says what it
	// does, or why it refreshes nothing.
	Refreshing bool
	Note       string
	Interval   time.Duration
	// Rounds counts its rounds; Refreshed, GaveWay and Failed its
	// refreshes committed, given up because a lock was not granted within
	// its lock timeout, and failed otherwise.
	Rounds, Refreshed, GaveWay, Failed int64
	// LastRound and LastRefresh are zero until there was one.
	LastRound, LastRefresh time.Time
	// LastError is the last refresh that gave way or failed, and why.
	LastError string
}

// RefresherSource returns the refresher's state; nil when there is no
// refresher to show.
type RefresherSource func() Refresher

// WritePrometheus writes the refresher's counters in the Prometheus text
// exposition format (version 0.0.4).
func (r Refresher) WritePrometheus(w io.Writer) error {
	var b strings.Builder
	on := 0
	if r.Refreshing {
		on = 1
	}
	b.WriteString("# HELP pgsketch_refresher_refreshing 1 while the background refresher refreshes at least one rollup; 0 while it cannot (the status page and the log say why).\n")
	b.WriteString("# TYPE pgsketch_refresher_refreshing gauge\n")
	fmt.Fprintf(&b, "pgsketch_refresher_refreshing %d\n", on)
	b.WriteString("# HELP pgsketch_refresher_rounds_total Rounds the background refresher ran.\n")
	b.WriteString("# TYPE pgsketch_refresher_rounds_total counter\n")
	fmt.Fprintf(&b, "pgsketch_refresher_rounds_total %d\n", r.Rounds)
	b.WriteString("# HELP pgsketch_refresher_refreshes_total Refreshes by the background refresher, by result: committed, gave way (a lock not granted within its lock timeout), failed.\n")
	b.WriteString("# TYPE pgsketch_refresher_refreshes_total counter\n")
	fmt.Fprintf(&b, "pgsketch_refresher_refreshes_total{result=\"ok\"} %d\n", r.Refreshed)
	fmt.Fprintf(&b, "pgsketch_refresher_refreshes_total{result=\"gave_way\"} %d\n", r.GaveWay)
	fmt.Fprintf(&b, "pgsketch_refresher_refreshes_total{result=\"failed\"} %d\n", r.Failed)
	_, err := io.WriteString(w, b.String())
	return err
}
