package e2e

// The differential test: the corpus in
// testdata/differential/corpus.txt is run by a raw pgproto3 frontend over a
// direct connection and through pgsketch-proxy, each in a fresh database made
// from the same template, and the two backend message streams must be
// identical, message by message and byte by byte, except for the allowed
// differences below (allowedDifferences, also printed on failure).
//
// The corpus is first run twice directly (two fresh databases) and those two
// streams must already be identical: that proves the corpus deterministic, so
// any difference through the proxy is the proxy's.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

const corpusPath = "testdata/differential/corpus.txt"

// -differential.dump writes the direct run's messages, readable, to a file:
// for reviewing what each corpus entry really does.
var differentialDump = flag.String("differential.dump", "", "write the direct transcript of the differential corpus to this file")

// allowedDifferences documents every way the two streams may legitimately
// differ; normalize applies exactly these, to both sides alike.
const allowedDifferences = `allowed differences (normalized away on both sides before comparing):
  1. BackendKeyData: its process ID and secret key are not compared (the proxy substitutes its own cancel key); exactly one must be sent during startup.
  2. NotificationResponse.ProcessID: the PID of the notifying backend; it differs between any two sessions (the corpus notifies itself).
  3. OIDs >= 16384 (FirstNormalObjectId) in RowDescription (table OID, type OID) and ParameterDescription: objects the corpus creates get different OIDs in the two databases; they are renumbered 1000000001, 1000000002, ... in order of first appearance, so the same object must still appear in the same places on both sides.
  4. AuthenticationSASLContinue/AuthenticationSASLFinal data (nonces, salt, signatures) when the server asks for SCRAM.
  Everything else -- ParameterStatus, ErrorResponse and NoticeResponse fields (severity, SQLSTATE, message, detail, hint, position, file, line, routine), RowDescription, DataRow bytes in text and binary, COPY data, CommandComplete tags, ReadyForQuery status, message order -- must be identical.`

// corpusEntry is one entry of the corpus file; see the file's header for the
// syntax.
type corpusEntry struct {
	line          int
	kind          string // "simple" or "extended"
	sql           string
	resultFormats []int16
	params        [][]byte
	paramFormats  []int16
	copyData      [][]byte // CopyData messages to send after CopyInResponse
	copyFail      string   // send CopyFail with this message instead of CopyDone
	hasCopyFail   bool
	prepare       string   // Parse as this named statement and Describe it
	use           string   // no Parse: Bind the existing statement of this name
	closeStmts    []string // Close these statements after executing
	executes      []uint32 // Execute row limits (default one Execute, 0 = all rows)
	nosync        bool     // no Sync: the next entry joins the same pipeline
}

func (e *corpusEntry) String() string {
	return fmt.Sprintf("%s:%d (%s)", corpusPath, e.line, e.kind)
}

func parseCorpus(path string) ([]*corpusEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		entries []*corpusEntry
		cur     *corpusEntry
		body    []string
		lineNo  int
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
			body = body[:len(body)-1]
		}
		cur.sql = strings.Join(body, "\n")
		if cur.kind == "simple" && (cur.nosync || cur.use != "" || cur.prepare != "" || len(cur.params) > 0 || len(cur.executes) > 0) {
			return fmt.Errorf("%s:%d: simple entries take no @nosync, @use, @prepare, @param or @execute", path, cur.line)
		}
		if cur.nosync && (len(cur.copyData) > 0 || cur.hasCopyFail) {
			return fmt.Errorf("%s:%d: a COPY FROM STDIN entry must end its pipeline (no @nosync)", path, cur.line)
		}
		if len(cur.executes) == 0 {
			cur.executes = []uint32{0}
		}
		entries = append(entries, cur)
		cur, body = nil, nil
		return nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if hdr, ok := strings.CutPrefix(line, "=== "); ok {
			if err := finish(); err != nil {
				return nil, err
			}
			fields := strings.Fields(hdr)
			if len(fields) == 0 || (fields[0] != "simple" && fields[0] != "extended") {
				return nil, fmt.Errorf("%s:%d: header %q: want simple or extended", path, lineNo, line)
			}
			cur = &corpusEntry{line: lineNo, kind: fields[0]}
			for _, opt := range fields[1:] {
				switch {
				case opt == "text":
					cur.resultFormats = nil
				case opt == "binary":
					cur.resultFormats = []int16{1}
				case strings.HasPrefix(opt, "formats="):
					for _, s := range strings.Split(opt[len("formats="):], ",") {
						n, err := strconv.Atoi(s)
						if err != nil {
							return nil, fmt.Errorf("%s:%d: %s", path, lineNo, opt)
						}
						cur.resultFormats = append(cur.resultFormats, int16(n))
					}
				case opt == "nosync":
					cur.nosync = true
				default:
					return nil, fmt.Errorf("%s:%d: unknown option %q", path, lineNo, opt)
				}
			}
			if cur.kind == "simple" && len(cur.resultFormats) > 0 {
				return nil, fmt.Errorf("%s:%d: the simple protocol has no result formats", path, lineNo)
			}
			continue
		}
		if cur == nil {
			continue // file header: comments
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if dir, ok := strings.CutPrefix(line, "@"); ok {
			name, arg, _ := strings.Cut(dir, " ")
			switch name {
			case "param":
				cur.params = append(cur.params, []byte(unescapeCorpus(arg)))
				cur.paramFormats = append(cur.paramFormats, 0)
			case "null":
				cur.params = append(cur.params, nil)
				cur.paramFormats = append(cur.paramFormats, 0)
			case "bparam":
				b, err := hex.DecodeString(arg)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: @bparam: %v", path, lineNo, err)
				}
				cur.params = append(cur.params, b)
				cur.paramFormats = append(cur.paramFormats, 1)
			case "copy":
				cur.copyData = append(cur.copyData, []byte(unescapeCorpus(arg)+"\n"))
			case "copyhex":
				b, err := hex.DecodeString(arg)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: @copyhex: %v", path, lineNo, err)
				}
				cur.copyData = append(cur.copyData, b)
			case "copyfail":
				cur.copyFail, cur.hasCopyFail = arg, true
			case "copydone":
				// COPY FROM STDIN with no data lines
				cur.copyData = append(cur.copyData, nil)
			case "prepare":
				cur.prepare = arg
			case "use":
				cur.use = arg
			case "close":
				cur.closeStmts = append(cur.closeStmts, arg)
			case "execute":
				for _, s := range strings.Split(arg, ",") {
					n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
					if err != nil {
						return nil, fmt.Errorf("%s:%d: @execute: %v", path, lineNo, err)
					}
					cur.executes = append(cur.executes, uint32(n))
				}
			default:
				return nil, fmt.Errorf("%s:%d: unknown directive @%s", path, lineNo, name)
			}
			continue
		}
		body = append(body, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return entries, nil
}

// unescapeCorpus turns \t, \n, \\ in directive arguments into tab, newline
// and backslash, so COPY lines can be written on one line.
func unescapeCorpus(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 't':
				b.WriteByte('\t')
				i++
				continue
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// exchange is one round trip: the entries sent before a Sync (or one simple
// Query) and every backend message up to and including ReadyForQuery.
type exchange struct {
	entries []*corpusEntry
	msgs    [][]byte
}

func (x *exchange) where() string {
	parts := make([]string, len(x.entries))
	for i, e := range x.entries {
		parts[i] = e.String()
	}
	return strings.Join(parts, " + ")
}

// transcript is everything the backend sent in one run of the corpus.
type transcript struct {
	startup   [][]byte
	exchanges []*exchange
}

// groupCorpus splits the corpus into round trips.
func groupCorpus(entries []*corpusEntry) [][]*corpusEntry {
	var groups [][]*corpusEntry
	var cur []*corpusEntry
	for _, e := range entries {
		cur = append(cur, e)
		if !e.nosync {
			groups = append(groups, cur)
			cur = nil
		}
	}
	if cur != nil {
		groups = append(groups, cur)
	}
	return groups
}

// runCorpus runs the corpus on one new connection to target and records the
// backend's messages.
func runCorpus(ctx context.Context, target rawTarget, entries []*corpusEntry) (*transcript, error) {
	target.Params = map[string]string{
		"application_name": "pgsketch-differential",
		"client_encoding":  "UTF8",
		"DateStyle":        "ISO, MDY",
		"TimeZone":         "UTC",
	}
	c, err := dialRaw(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("startup: %w", err)
	}
	defer c.Close()
	tr := &transcript{startup: c.Startup}
	for _, group := range groupCorpus(entries) {
		x := &exchange{entries: group}
		tr.exchanges = append(tr.exchanges, x)
		if err := c.roundTrip(x); err != nil {
			return tr, fmt.Errorf("%s: %w; received so far:\n%s", x.where(), err, listMessages(x.msgs, 0, len(x.msgs)))
		}
	}
	return tr, nil
}

// roundTrip sends the group's messages, then reads up to ReadyForQuery,
// answering each CopyInResponse with the next COPY entry's data as libpq
// does: CopyData..., CopyDone (or CopyFail), and for the extended protocol
// another Sync (the one sent with the statement is ignored by the server
// while it is in COPY FROM STDIN).
func (c *rawConn) roundTrip(x *exchange) error {
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.conn.SetDeadline(time.Time{})
	var copies []*corpusEntry
	for _, e := range x.entries {
		if len(e.copyData) > 0 || e.hasCopyFail {
			copies = append(copies, e)
		}
		if e.kind == "simple" {
			c.fe.Send(&pgproto3.Query{String: e.sql})
			continue
		}
		stmt := e.prepare
		if e.use != "" {
			stmt = e.use
		} else {
			c.fe.Send(&pgproto3.Parse{Name: e.prepare, Query: e.sql})
		}
		if e.prepare != "" {
			c.fe.Send(&pgproto3.Describe{ObjectType: 'S', Name: e.prepare})
		}
		c.fe.Send(&pgproto3.Bind{PreparedStatement: stmt, ParameterFormatCodes: e.paramFormats,
			Parameters: e.params, ResultFormatCodes: e.resultFormats})
		c.fe.Send(&pgproto3.Describe{ObjectType: 'P'})
		for _, n := range e.executes {
			c.fe.Send(&pgproto3.Execute{MaxRows: n})
		}
		for _, name := range e.closeStmts {
			c.fe.Send(&pgproto3.Close{ObjectType: 'S', Name: name})
		}
		if !e.nosync {
			c.fe.Send(&pgproto3.Sync{})
		}
	}
	if err := c.fe.Flush(); err != nil {
		return err
	}
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			return fmt.Errorf("no ReadyForQuery: %w", err)
		}
		raw, err := msg.Encode(nil)
		if err != nil {
			return err
		}
		x.msgs = append(x.msgs, raw)
		switch msg.(type) {
		case *pgproto3.ReadyForQuery:
			return nil
		case *pgproto3.CopyInResponse:
			if len(copies) == 0 {
				c.fe.Send(&pgproto3.CopyFail{Message: "the corpus entry has no COPY data"})
				if x.entries[len(x.entries)-1].kind == "extended" {
					c.fe.Send(&pgproto3.Sync{})
				}
			} else {
				e := copies[0]
				copies = copies[1:]
				for _, d := range e.copyData {
					if d != nil {
						c.fe.Send(&pgproto3.CopyData{Data: d})
					}
				}
				if e.hasCopyFail {
					c.fe.Send(&pgproto3.CopyFail{Message: e.copyFail})
				} else {
					c.fe.Send(&pgproto3.CopyDone{})
				}
				if e.kind == "extended" {
					c.fe.Send(&pgproto3.Sync{})
				}
			}
			if err := c.fe.Flush(); err != nil {
				return err
			}
		}
	}
}

// normalizer applies allowedDifferences to one transcript, in stream order.
type normalizer struct {
	oids map[uint32]uint32
}

const firstNormalObjectID = 16384

func (n *normalizer) oid(o uint32) uint32 {
	if o < firstNormalObjectID {
		return o
	}
	if n.oids == nil {
		n.oids = map[uint32]uint32{}
	}
	if m, ok := n.oids[o]; ok {
		return m
	}
	m := uint32(1000000001 + len(n.oids))
	n.oids[o] = m
	return m
}

func (n *normalizer) normalize(raw []byte) ([]byte, error) {
	switch raw[0] {
	case 'K', 'A', 'T', 't', 'R':
	default:
		return raw, nil
	}
	msg, err := decodeBackend(raw)
	if err != nil {
		return nil, err
	}
	switch m := msg.(type) {
	case *pgproto3.BackendKeyData:
		m.ProcessID, m.SecretKey = 0, []byte{0, 0, 0, 0}
	case *pgproto3.NotificationResponse:
		m.PID = 0
	case *pgproto3.RowDescription:
		for i := range m.Fields {
			m.Fields[i].TableOID = n.oid(m.Fields[i].TableOID)
			m.Fields[i].DataTypeOID = n.oid(m.Fields[i].DataTypeOID)
		}
	case *pgproto3.ParameterDescription:
		for i := range m.ParameterOIDs {
			m.ParameterOIDs[i] = n.oid(m.ParameterOIDs[i])
		}
	case *pgproto3.AuthenticationSASLContinue:
		m.Data = nil
	case *pgproto3.AuthenticationSASLFinal:
		m.Data = nil
	default:
		return raw, nil
	}
	return msg.Encode(nil)
}

func (n *normalizer) all(msgs [][]byte) ([][]byte, error) {
	out := make([][]byte, len(msgs))
	for i, raw := range msgs {
		var err error
		if out[i], err = n.normalize(raw); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return out, nil
}

func listMessages(msgs [][]byte, from, to int) string {
	var b strings.Builder
	from = max(from, 0)
	to = min(to, len(msgs))
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "      [%d] %s\n", i, truncate(describeBackend(msgs[i]), 600))
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d more bytes)", len(s)-n)
}

// diffTranscripts compares two transcripts after normalizing each, and
// describes up to maxDiffs differing round trips (first differing message,
// both sides, with the messages before it for context). It returns "" when
// they are the same.
func diffTranscripts(nameA string, a *transcript, nameB string, b *transcript) string {
	const maxDiffs = 5
	var out strings.Builder
	diffs := 0
	na, nb := &normalizer{}, &normalizer{}
	compare := func(where, sql string, ma, mb [][]byte) {
		ma, errA := na.all(ma)
		mb, errB := nb.all(mb)
		if errA != nil || errB != nil {
			fmt.Fprintf(&out, "%s: cannot normalize: %v / %v\n", where, errA, errB)
			diffs++
			return
		}
		i := 0
		for i < len(ma) && i < len(mb) && bytes.Equal(ma[i], mb[i]) {
			i++
		}
		if i == len(ma) && i == len(mb) {
			return
		}
		diffs++
		if diffs > maxDiffs {
			return
		}
		fmt.Fprintf(&out, "\n--- %s\n", where)
		if sql != "" {
			fmt.Fprintf(&out, "    statement: %s\n", truncate(sql, 400))
		}
		fmt.Fprintf(&out, "    first difference at message %d (%s sent %d messages, %s sent %d)\n", i, nameA, len(ma), nameB, len(mb))
		if i > 0 {
			fmt.Fprintf(&out, "    same on both sides before it:\n%s", listMessages(ma, i-3, i))
		}
		fmt.Fprintf(&out, "    %s:\n%s", nameA, sideOrNothing(ma, i))
		fmt.Fprintf(&out, "    %s:\n%s", nameB, sideOrNothing(mb, i))
	}
	compare("startup", "", a.startup, b.startup)
	if n := countType(a.startup, 'K'); n != 1 {
		fmt.Fprintf(&out, "\n--- startup: %s sent %d BackendKeyData, want 1\n", nameA, n)
		diffs++
	}
	if n := countType(b.startup, 'K'); n != 1 {
		fmt.Fprintf(&out, "\n--- startup: %s sent %d BackendKeyData, want 1\n", nameB, n)
		diffs++
	}
	for i := 0; i < max(len(a.exchanges), len(b.exchanges)); i++ {
		var xa, xb exchange
		if i < len(a.exchanges) {
			xa = *a.exchanges[i]
		}
		if i < len(b.exchanges) {
			xb = *b.exchanges[i]
		}
		x := xa
		if x.entries == nil {
			x = xb
		}
		var sqls []string
		for _, e := range x.entries {
			sqls = append(sqls, e.sql)
		}
		compare(x.where(), strings.Join(sqls, " | "), xa.msgs, xb.msgs)
	}
	if diffs == 0 {
		return ""
	}
	if diffs > maxDiffs {
		fmt.Fprintf(&out, "\n... and %d more differing round trips\n", diffs-maxDiffs)
	}
	return fmt.Sprintf("%d round trips differ between %s and %s:\n%s\n%s", diffs, nameA, nameB, out.String(), allowedDifferences)
}

func dumpTranscript(tr *transcript) string {
	var b strings.Builder
	fmt.Fprintf(&b, "startup:\n%s", listMessages(tr.startup, 0, len(tr.startup)))
	for _, x := range tr.exchanges {
		fmt.Fprintf(&b, "\n%s\n", x.where())
		for _, e := range x.entries {
			fmt.Fprintf(&b, "    > %s\n", truncate(strings.ReplaceAll(e.sql, "\n", " "), 300))
		}
		b.WriteString(listMessages(x.msgs, 0, len(x.msgs)))
	}
	return b.String()
}

func sideOrNothing(msgs [][]byte, i int) string {
	if i >= len(msgs) {
		return "      (nothing: the stream ends here)\n"
	}
	return listMessages(msgs, i, i+2)
}

func countType(msgs [][]byte, typ byte) int {
	n := 0
	for _, m := range msgs {
		if m[0] == typ {
			n++
		}
	}
	return n
}

// checkCorpusCoverage makes sure the corpus still exercises what the issue
// asks for, so the test cannot quietly shrink into one that proves little.
func checkCorpusCoverage(t *testing.T, entries []*corpusEntry, tr *transcript) {
	t.Helper()
	counts := map[string]int{}
	var all [][]byte
	for _, x := range tr.exchanges {
		all = append(all, x.msgs...)
	}
	for _, raw := range all {
		msg, err := decodeBackend(raw)
		if err != nil {
			t.Fatalf("recorded message does not decode: %v", err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			counts["ErrorResponse"]++
			if m.Position > 0 {
				counts["ErrorResponse with position"]++
			}
		case *pgproto3.NoticeResponse:
			counts["NoticeResponse"]++
		case *pgproto3.RowDescription:
			for _, f := range m.Fields {
				counts[fmt.Sprintf("column format %d", f.Format)]++
			}
		case *pgproto3.ReadyForQuery:
			counts["ReadyForQuery "+string(m.TxStatus)]++
		case *pgproto3.CommandComplete:
			counts["CommandComplete"]++
			if bytes.HasPrefix(m.CommandTag, []byte("COPY")) {
				counts["COPY"]++
			}
		default:
			counts[strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3.")]++
		}
	}
	kinds := map[string]int{}
	for _, e := range entries {
		kinds[e.kind]++
	}
	want := map[string]int{
		"CommandComplete":             100,
		"DataRow":                     100,
		"ErrorResponse":               10,
		"ErrorResponse with position": 3,
		"NoticeResponse":              5,
		"column format 0":             20,
		"column format 1":             20,
		"CopyInResponse":              3,
		"CopyOutResponse":             3,
		"CopyData":                    10,
		"COPY":                        5,
		"EmptyQueryResponse":          2,
		"PortalSuspended":             1,
		"ParameterDescription":        1,
		"ParameterStatus":             2,
		"NotificationResponse":        1,
		"CloseComplete":               1,
		"NoData":                      5,
		"ReadyForQuery I":             50,
		"ReadyForQuery T":             5,
		"ReadyForQuery E":             3,
	}
	for k, n := range want {
		if counts[k] < n {
			t.Errorf("corpus coverage: %d %s in the direct stream, want at least %d", counts[k], k, n)
		}
	}
	if len(entries) < 100 || kinds["simple"] < 30 || kinds["extended"] < 30 {
		t.Errorf("corpus coverage: %d entries (%d simple, %d extended), want at least 100 with 30 of each", len(entries), kinds["simple"], kinds["extended"])
	}
}

// upstreamURL is the shared test server's host and port as a proxy upstream
// URL (user, password and database come from each client).
func upstreamURL(t *testing.T) string {
	t.Helper()
	tg, err := targetFromDSN(server.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", Host: tg.Addr, Path: "/", RawQuery: "sslmode=disable"}
	return u.String()
}

func runCorpusOn(t *testing.T, ctx context.Context, dsn string, entries []*corpusEntry) *transcript {
	t.Helper()
	target, err := targetFromDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := runCorpus(ctx, target, entries)
	if err != nil {
		t.Fatalf("run corpus on %s: %v", target.Addr, err)
	}
	return tr
}

func TestDifferential(t *testing.T) {
	t.Parallel()
	entries, err := parseCorpus(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	direct := runCorpusOn(t, ctx, newTestDB(t).DSN, entries)
	checkCorpusCoverage(t, entries, direct)
	if *differentialDump != "" {
		if err := os.WriteFile(*differentialDump, []byte(dumpTranscript(direct)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	again := runCorpusOn(t, ctx, newTestDB(t).DSN, entries)
	if d := diffTranscripts("direct run 1", direct, "direct run 2", again); d != "" {
		t.Fatalf("the corpus is not deterministic: two direct runs in fresh databases differ, so differences through the proxy would prove nothing; make the corpus deterministic.\n%s", d)
	}

	proxy := startProxy(t, upstreamURL(t))
	viaProxy := runCorpusOn(t, ctx, proxy.URL(newTestDB(t).DSN), entries)
	if d := diffTranscripts("direct", direct, "proxy", viaProxy); d != "" {
		t.Fatalf("through pgsketch-proxy the backend message stream differs from the direct one.\n%s", d)
	}
	var n int
	for _, x := range direct.exchanges {
		n += len(x.msgs)
	}
	t.Logf("%d corpus entries, %d round trips, %d backend messages identical direct and through the proxy", len(entries), len(direct.exchanges), n)
}

// TestDifferentialNormalizer checks the allowed differences are exactly
// those: each normalized field is ignored, any other change is seen.
func TestDifferentialNormalizer(t *testing.T) {
	enc := func(m pgproto3.BackendMessage) []byte {
		b, err := m.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	entry := &corpusEntry{line: 1, kind: "simple", sql: "SELECT 1"}
	mk := func(pid uint32, key byte, tableOID, typeOID uint32, row string, status string) *transcript {
		return &transcript{
			startup: [][]byte{
				enc(&pgproto3.AuthenticationOk{}),
				enc(&pgproto3.ParameterStatus{Name: "TimeZone", Value: status}),
				enc(&pgproto3.BackendKeyData{ProcessID: pid, SecretKey: []byte{key, 2, 3, 4}}),
				enc(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
			},
			exchanges: []*exchange{{entries: []*corpusEntry{entry}, msgs: [][]byte{
				enc(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("a"), TableOID: tableOID, DataTypeOID: typeOID, DataTypeSize: -1}}}),
				enc(&pgproto3.DataRow{Values: [][]byte{[]byte(row)}}),
				enc(&pgproto3.NotificationResponse{PID: pid, Channel: "c", Payload: "p"}),
				enc(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}),
				enc(&pgproto3.ReadyForQuery{TxStatus: 'I'}),
			}}},
		}
	}
	base := mk(100, 1, 20000, 25, "x", "UTC")
	if d := diffTranscripts("a", base, "b", mk(200, 9, 30000, 25, "x", "UTC")); d != "" {
		t.Errorf("PIDs, cancel keys and user OIDs must be ignored, got:\n%s", d)
	}
	for name, other := range map[string]*transcript{
		"DataRow":         mk(100, 1, 20000, 25, "y", "UTC"),
		"builtin type":    mk(100, 1, 20000, 23, "x", "UTC"),
		"ParameterStatus": mk(100, 1, 20000, 25, "x", "Europe/Paris"),
		"user vs builtin": mk(100, 1, 1259, 25, "x", "UTC"),
	} {
		if d := diffTranscripts("a", base, "b", other); d == "" {
			t.Errorf("%s: a difference went unseen", name)
		} else if !strings.Contains(d, "first difference at message") {
			t.Errorf("%s: unreadable report:\n%s", name, d)
		}
	}
	// One OID renumbered consistently: a different object in the same place is seen.
	two := mk(100, 1, 20000, 25, "x", "UTC")
	two.exchanges[0].msgs = append([][]byte{enc(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("a"), TableOID: 20000}}})}, two.exchanges[0].msgs...)
	three := mk(100, 1, 20001, 25, "x", "UTC")
	three.exchanges[0].msgs = append([][]byte{enc(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("a"), TableOID: 20000}}})}, three.exchanges[0].msgs...)
	if d := diffTranscripts("a", two, "b", three); d == "" {
		t.Error("the same table on one side and two different tables on the other went unseen")
	}
	// A missing BackendKeyData is seen.
	noKey := mk(100, 1, 20000, 25, "x", "UTC")
	noKey.startup = append(noKey.startup[:2:2], noKey.startup[3])
	if d := diffTranscripts("a", base, "b", noKey); d == "" {
		t.Error("a missing BackendKeyData went unseen")
	}
}
