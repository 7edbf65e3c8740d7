package wire

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMetricsExposition(t *testing.T) {
	var m Metrics
	m.connsTotal.Add(3)
	m.connsOpen.Add(1)
	m.bytesFromClients.Add(100)
	m.messagesFromUpstream.Add(7)
	m.countError(kindUpstreamConnect)
	m.connectSeconds.observe(3 * time.Millisecond)
	m.connectSeconds.observe(2 * time.Second)
	var b bytes.Buffer
	if err := m.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE pgsketch_connections_open gauge\npgsketch_connections_open 1\n",
		"pgsketch_connections_total 3\n",
		`pgsketch_bytes_total{direction="from_client"} 100` + "\n",
		`pgsketch_messages_total{direction="from_upstream"} 7` + "\n",
		`pgsketch_errors_total{kind="upstream_connect"} 1` + "\n",
		`pgsketch_errors_total{kind="protocol"} 0` + "\n",
		`pgsketch_upstream_connect_seconds_bucket{le="0.0025"} 0` + "\n",
		`pgsketch_upstream_connect_seconds_bucket{le="0.005"} 1` + "\n",
		`pgsketch_upstream_connect_seconds_bucket{le="2.5"} 2` + "\n",
		`pgsketch_upstream_connect_seconds_bucket{le="+Inf"} 2` + "\n",
		"pgsketch_upstream_connect_seconds_sum 2.003\n",
		"pgsketch_upstream_connect_seconds_count 2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
