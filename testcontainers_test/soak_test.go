package e2e

// Soak: 50 clients at once, each on its own
// connection through pgsketch-proxy, mixing queries answered from a rollup
// with queries passed through, for PGSKETCH_SOAK_DURATION (default 60 s).
// No query may fail or give another answer than it gives alone, and once
// the clients have gone the proxy process must be back to its goroutine
// count and live heap of before the run, its resident memory not having
// kept growing during it.
//
// The test is not parallel: Go runs it before the parallel tests of this
// package resume, so the proxy is measured alone and the load does not
// slow the other tests. It adds about the duration to the suite.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const soakClients = 50

// soakQueries: the rollup answers the first four (one with edge rows from
// the base table, one with the tail after the watermark), PostgreSQL the
// others.
var soakQueries = []rollupQuery{
	{rollup: true, sql: `SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-01-05' AND created_at < '2026-01-12' GROUP BY country ORDER BY country`},
	{rollup: true, sql: `SELECT approx_count_distinct(user_id) AS users, count(*) AS n FROM events`},
	{rollup: true, sql: `SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-01-10 06:00' AND created_at < '2026-01-15 18:00' GROUP BY 1 ORDER BY 1`},
	{rollup: true, sql: `SELECT device, count(DISTINCT user_id) AS users, sum(amount) AS revenue FROM events WHERE created_at >= '2026-01-25' GROUP BY 1 ORDER BY 1`},
	{rollup: false, sql: `SELECT 1 AS one`},
	{rollup: false, sql: `SELECT count(*) AS n FROM events WHERE created_at < '2026-01-02'`},
	{rollup: false, sql: `SELECT id, user_id, country, device, amount FROM events ORDER BY id LIMIT 50`},
	{rollup: false, sql: `SELECT count(DISTINCT user_id) AS users FROM events WHERE user_id % 7 = 0 AND created_at < '2026-01-03'`},
	{rollup: false, sql: `SELECT country, sum(amount) AS revenue FROM events WHERE created_at >= '2026-01-20' AND created_at < '2026-01-21' GROUP BY 1 ORDER BY 1`},
}

func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("PGSKETCH_SOAK_DURATION")
	if v == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("PGSKETCH_SOAK_DURATION=%q: want a positive Go duration such as 60s", v)
	}
	return d
}

// proxyStats are the proxy process's figures the soak watches.
type proxyStats struct {
	goroutines int
	heapAlloc  uint64 // live heap after a forced GC
	rss        uint64
}

func (s proxyStats) String() string {
	return fmt.Sprintf("%d goroutines, heap %.1f MiB, RSS %.1f MiB", s.goroutines, mib(s.heapAlloc), mib(s.rss))
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// pprofAddr is the address the proxy serves net/http/pprof on (it logs it).
func (p *proxyProc) pprofAddr(t *testing.T) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(p.Log()))
	re := regexp.MustCompile(`"msg":"pprof listening".*"addr":"([^"]+)"`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("the proxy did not log its pprof address:\n%s", p.Log())
	return ""
}

var (
	goroutineTotalRE = regexp.MustCompile(`^goroutine profile: total (\d+)`)
	heapAllocRE      = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)
	vmRSSRE          = regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`)
)

// pprofClient keeps no connections alive: each reading costs the proxy the
// same one goroutine while it is served.
var pprofClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func pprofGet(addr, path string) (string, error) {
	resp, err := pprofClient.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", path, resp.Status)
	}
	return string(b), err
}

// rss is the resident set size of process pid (Linux).
func rss(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	m := vmRSSRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return kb << 10, nil
}

// readStats reads the proxy's goroutine count, its live heap after two
// garbage collections (a heap profile with gc=1 runs one first) and its RSS.
func readStats(t *testing.T, p *proxyProc, addr string) proxyStats {
	t.Helper()
	s := proxyStats{goroutines: readGoroutines(t, addr)}
	// The heap is read after two collections: a sync.Pool (the relay's
	// read buffers) frees what it holds only at the second collection after
	// it was last used, so one collection after the sessions end still
	// counts their buffers, 32 KiB each, as live.
	var h string
	var err error
	for range 2 {
		if h, err = pprofGet(addr, "/debug/pprof/heap?gc=1&debug=1"); err != nil {
			t.Fatal(err)
		}
	}
	hm := heapAllocRE.FindStringSubmatch(h)
	if hm == nil {
		t.Fatal("no HeapAlloc in the heap profile")
	}
	s.heapAlloc, _ = strconv.ParseUint(hm[1], 10, 64)
	if s.rss, err = rss(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return s
}

// readGoroutines reads the proxy's goroutine count.
func readGoroutines(t *testing.T, addr string) int {
	t.Helper()
	g, err := pprofGet(addr, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	m := goroutineTotalRE.FindStringSubmatch(g)
	if m == nil {
		t.Fatalf("goroutine profile starts %.80q", g)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestSoak(t *testing.T) {
	// Not parallel: see the file comment.
	duration := soakDuration(t)
	db, _ := rolledUpEvents(t, 300_000, 30, "2026-01-30 12:00", "2 days")
	p := startProxy(t, server.adminURL, "--approx", "on", "--pprof-listen", "127.0.0.1:0")
	url := p.URL(db.DSN)
	addr := p.pprofAddr(t)
	ctx := context.Background()

	// What each query gives alone: PostgreSQL's answer for those passed
	// through, and the proxy's for the others (the same sketches merge to
	// the same estimate every time), checked against the exact answer.
	direct := connectSimple(t, db.DSN)
	warmup := connectSimple(t, url)
	want := make([]string, len(soakQueries))
	for i, q := range soakQueries {
		exact, err := direct.query(ctx, q.exactSQL())
		if err != nil {
			t.Fatalf("direct: %v\n%s", err, q.sql)
		}
		got, err := warmup.query(ctx, q.sql)
		if err != nil {
			t.Fatalf("through the proxy: %v\n%s", err, q.sql)
		}
		if q.rollup {
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], rollupNotice) {
				t.Fatalf("notices %q, want the rollup's\n%s", got.notices, q.sql)
			}
			errs, err := compareRollupAnswer(got, exact)
			if err != nil || worstOf(errs) > 5 {
				t.Fatalf("%s: %v (worst %.2f standard errors)\n got %q\nwant %q", q.sql, err, worstOf(errs), got.rows, exact.rows)
			}
		} else if fmt.Sprint(got.raw, got.tag) != fmt.Sprint(exact.raw, exact.tag) || len(got.notices) != 0 {
			t.Fatalf("passthrough differs from direct: %s\n got %q %q\nwant %q", q.sql, got.rows, got.notices, exact.rows)
		}
		want[i] = fmt.Sprint(got.fields, got.raw, got.tag, len(got.notices))
	}
	warmup.Close(ctx)
	direct.Close(ctx)
	// Sessions end asynchronously: wait for the proxy to settle.
	var base proxyStats
	prev := -1
	waitFor(t, 15*time.Second, "the proxy to settle before the run", func() bool {
		base = readStats(t, p, addr)
		settled := base.goroutines == prev
		prev = base.goroutines
		return settled
	})
	t.Logf("before: %v", base)

	clients := make([]*noticeConn, soakClients)
	for i := range clients {
		clients[i] = connectSimple(t, url)
	}
	var (
		queries, rewritten atomic.Int64
		failures           atomic.Int64
		errMu              sync.Mutex
		firstErrs          []string
	)
	fail := func(format string, args ...any) {
		failures.Add(1)
		errMu.Lock()
		if len(firstErrs) < 10 {
			firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
		}
		errMu.Unlock()
	}
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for c, nc := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := c; time.Now().Before(deadline); n++ {
				i := n % len(soakQueries)
				q := soakQueries[i]
				got, err := nc.query(ctx, q.sql)
				queries.Add(1)
				if err != nil {
					fail("client %d: %v\n%s", c, err, q.sql)
					return
				}
				if g := fmt.Sprint(got.fields, got.raw, got.tag, len(got.notices)); g != want[i] {
					fail("client %d: another answer than alone:\n%s\n got %s\nwant %s", c, q.sql, g, want[i])
					return
				}
				if q.rollup {
					rewritten.Add(1)
				}
			}
		}()
	}

	// Meanwhile, the proxy's RSS every second, and its figures at a third
	// and at the end of the run.
	var samples []uint64
	var third, during proxyStats
	tick := time.NewTicker(time.Second)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	thirdAt := time.Now().Add(duration / 3)
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			r, err := rss(p.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, r)
			if third.goroutines == 0 && time.Now().After(thirdAt) {
				third = readStats(t, p, addr)
			}
			if time.Until(deadline) < 2*time.Second && during.goroutines == 0 {
				during = readStats(t, p, addr)
			}
		}
	}
	tick.Stop()
	t.Logf("%d queries by %d clients in %v (%d from the rollup), %d failed", queries.Load(), soakClients, duration,
		rewritten.Load(), failures.Load())
	if failures.Load() > 0 {
		t.Errorf("%d clients failed; the first:\n%s", failures.Load(), strings.Join(firstErrs, "\n"))
	}
	if queries.Load() < soakClients*int64(len(soakQueries)) {
		t.Errorf("only %d queries in %v", queries.Load(), duration)
	}
	t.Logf("a third in: %v; near the end: %v", third, during)
	if during.goroutines > 0 && during.goroutines < base.goroutines+soakClients {
		t.Errorf("%d goroutines with %d clients connected (%d before): are the sessions served?", during.goroutines, soakClients, base.goroutines)
	}
	// With the same sessions open, the goroutine count stays within two per
	// session (one while the event loop relays it, two while the relay's
	// goroutines do, as after a query pgsketch answered) plus the loops and
	// a few that come and go while a query runs or a profile is served.
	limit := base.goroutines + 2*soakClients + runtime.NumCPU() + 5
	for _, st := range []proxyStats{third, during} {
		if st.goroutines > limit {
			t.Errorf("%d goroutines with %d clients connected (%d before): more than two per session", st.goroutines, soakClients, base.goroutines)
		}
	}

	for _, nc := range clients {
		nc.Close(ctx)
	}
	waitFor(t, 30*time.Second, "the proxy's goroutines to return to the count before the run", func() bool {
		return readGoroutines(t, addr) <= base.goroutines
	})
	after := readStats(t, p, addr)
	t.Logf("after: %v", after)

	// Live heap: back to what it was, give or take what the allocator and
	// the runtime keep (under 1 MiB when measured; one session's state is a
	// few KiB, its read buffers 96 KiB).
	const heapSlack = 2 << 20
	if after.heapAlloc > base.heapAlloc+heapSlack {
		t.Errorf("live heap %.1f MiB after the run, %.1f MiB before: more than %d MiB retained",
			mib(after.heapAlloc), mib(base.heapAlloc), heapSlack>>20)
	}
	// RSS: the Go runtime returns freed memory to the system only slowly,
	// so RSS after the run is not compared with before; but under a steady
	// load it must level off: the highest reading of the last third of the
	// run within 25 % (+16 MiB) of the highest of the first third.
	if n := len(samples); n >= 6 {
		first, last := slices.Max(samples[:n/3]), slices.Max(samples[n-n/3:])
		t.Logf("RSS: highest %.1f MiB in the first third, %.1f MiB in the last third", mib(first), mib(last))
		if float64(last) > 1.25*float64(first)+16<<20 {
			t.Errorf("RSS kept growing: %.1f MiB at most in the first third of the run, %.1f MiB in the last", mib(first), mib(last))
		}
	}
}
