package wire

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Metrics counts what a Server does, for the Prometheus text format
// (WritePrometheus). Counters are updated once per read or write, never per
// message, so the relay's hot path pays an atomic add per system call.
type Metrics struct {
	connsOpen, connsTotal                     atomic.Int64
	bytesFromClients, bytesToClients          atomic.Int64
	bytesFromUpstream, bytesToUpstream        atomic.Int64
	messagesFromClients, messagesFromUpstream atomic.Int64
	errors                                    [numErrorKinds]atomic.Int64
	connectSeconds                            histogram
}

// errorKind classifies why a session or connection attempt failed.
type errorKind int

// The kinds of errors the metrics count.
const (
	kindUpstreamConnect errorKind = iota // the upstream could not be reached
	kindStartup                          // startup or authentication failed otherwise
	kindProtocol                         // a malformed or oversized message from either side
	kindUpstreamLost                     // the upstream went away during a session
	numErrorKinds
)

var errorKindNames = [numErrorKinds]string{"upstream_connect", "startup", "protocol", "upstream_lost"}

func (m *Metrics) countError(k errorKind) { m.errors[k].Add(1) }

// connectBuckets are the upper bounds, in seconds, of the upstream connect
// latency histogram.
var connectBuckets = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type histogram struct {
	counts [len(connectBuckets) + 1]atomic.Int64 // the last is +Inf
	sumNs  atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(connectBuckets) && s > connectBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// WritePrometheus writes every metric in the Prometheus text exposition
// format (version 0.0.4).
func (m *Metrics) WritePrometheus(w io.Writer) error {
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	metric := func(name, typ, help string, v int64) {
		p("# HELP %s %s\n# TYPE %s %s\n%s %d\n", name, help, name, typ, name, v)
	}
	metric("pgsketch_connections_open", "gauge", "Client sessions open now.", m.connsOpen.Load())
	metric("pgsketch_connections_total", "counter", "Client connections accepted.", m.connsTotal.Load())
	p("# HELP pgsketch_bytes_total Bytes relayed, by direction.\n# TYPE pgsketch_bytes_total counter\n")
	p("pgsketch_bytes_total{direction=\"from_client\"} %d\n", m.bytesFromClients.Load())
	p("pgsketch_bytes_total{direction=\"to_upstream\"} %d\n", m.bytesToUpstream.Load())
	p("pgsketch_bytes_total{direction=\"from_upstream\"} %d\n", m.bytesFromUpstream.Load())
	p("pgsketch_bytes_total{direction=\"to_client\"} %d\n", m.bytesToClients.Load())
	p("# HELP pgsketch_messages_total Protocol messages after startup, by where they came from.\n# TYPE pgsketch_messages_total counter\n")
	p("pgsketch_messages_total{direction=\"from_client\"} %d\n", m.messagesFromClients.Load())
	p("pgsketch_messages_total{direction=\"from_upstream\"} %d\n", m.messagesFromUpstream.Load())
	p("# HELP pgsketch_errors_total Failed connection attempts and sessions, by kind.\n# TYPE pgsketch_errors_total counter\n")
	for k, name := range errorKindNames {
		p("pgsketch_errors_total{kind=%q} %d\n", name, m.errors[k].Load())
	}
	p("# HELP pgsketch_upstream_connect_seconds Time to open a TCP (and TLS) connection to the upstream.\n")
	p("# TYPE pgsketch_upstream_connect_seconds histogram\n")
	var cum int64
	for i, le := range connectBuckets {
		cum += m.connectSeconds.counts[i].Load()
		p("pgsketch_upstream_connect_seconds_bucket{le=\"%g\"} %d\n", le, cum)
	}
	cum += m.connectSeconds.counts[len(connectBuckets)].Load()
	p("pgsketch_upstream_connect_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	p("pgsketch_upstream_connect_seconds_sum %g\n", time.Duration(m.connectSeconds.sumNs.Load()).Seconds())
	p("pgsketch_upstream_connect_seconds_count %d\n", cum)
	return err
}

// countedConn counts the bytes read from and written to a connection.
type countedConn struct {
	net.Conn
	read, written *atomic.Int64
}

func (c countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}
