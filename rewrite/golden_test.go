package rewrite

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// The golden files in testdata/*.txt hold cases of the form
//
//	rewrite [approx=on|off] [tz=ZONE] [search_path=a,b] [user=NAME] [merge=auto|proxy|server] [hll=off] [zones=N:ZONE,...] [abbreviations=SET]
//	SQL, one or more lines
//	----
//	expected output: the Plan's String(), or "passthrough: reason"
//
// separated by blank lines; lines starting with # between cases are
// comments. Run `go test ./rewrite -run Golden -rewrite` to regenerate the
// expected outputs, then review the diff.

var rewriteGolden = flag.Bool("rewrite", false, "rewrite the expected outputs of the golden files")

// goldenCase is one case of a golden file.
type goldenCase struct {
	file     string
	line     int
	cmd      string
	sql      string
	expected string
}

func readGolden(t testing.TB, path string) (cases []goldenCase, comments map[int][]string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	comments = map[int][]string{}
	i := 0
	for i < len(lines) {
		l := lines[i]
		if strings.TrimSpace(l) == "" {
			i++
			continue
		}
		if strings.HasPrefix(l, "#") {
			comments[len(cases)] = append(comments[len(cases)], l)
			i++
			continue
		}
		if !strings.HasPrefix(l, "rewrite") {
			t.Fatalf("%s:%d: want a rewrite directive, got %q", path, i+1, l)
		}
		c := goldenCase{file: path, line: i + 1, cmd: l}
		i++
		var sql []string
		for i < len(lines) && lines[i] != "----" {
			sql = append(sql, lines[i])
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: case without ----", path, c.line)
		}
		i++
		var exp []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			exp = append(exp, lines[i])
			i++
		}
		c.sql = strings.Join(sql, "\n")
		c.expected = strings.Join(exp, "\n")
		cases = append(cases, c)
	}
	return cases, comments
}

func (c goldenCase) session(t testing.TB) Session {
	s := Session{TimeZone: "UTC", Approx: true}
	for _, f := range strings.Fields(c.cmd)[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("%s:%d: bad option %q", c.file, c.line, f)
		}
		switch k {
		case "approx":
			s.Approx = v == "on"
		case "tz":
			s.TimeZone = v
		case "datestyle": // e.g. datestyle=SQL,DMY
			s.DateStyle = strings.ReplaceAll(v, ",", ", ")
		case "search_path":
			s.SearchPath = strings.ReplaceAll(v, ",", ", ")
		case "user":
			s.User = v
		case "merge":
			s.Merge = Merge(v)
		case "topk":
			s.TopK = v
		case "hll": // the snapshot's extension: see snapshot
		case "abbreviations":
			s.Abbreviations = v
		case "zones": // values bound to $N, which name time zones
			values := map[int]string{}
			for _, nz := range strings.Split(v, ",") {
				n, z, _ := strings.Cut(nz, ":")
				i, err := strconv.Atoi(n)
				if err != nil {
					t.Fatalf("%s:%d: bad zones %q", c.file, c.line, v)
				}
				values[i] = z
			}
			s.Zones, _ = plan.ZoneValues(values)
		default:
			t.Fatalf("%s:%d: unknown option %q", c.file, c.line, k)
		}
	}
	return s
}

// snapshot is snap as the case's options have it: "hll=off" plans
// against a database without the hll extension.
func (c goldenCase) snapshot(snap *catalog.Snapshot) *catalog.Snapshot {
	for _, f := range strings.Fields(c.cmd)[1:] {
		if f == "hll=off" {
			return snap.WithHLL(catalog.Extension{})
		}
	}
	return snap
}

func output(r Result) string {
	if r.Plan == nil {
		if r.Unsupported != "" {
			return "passthrough: " + r.Reason + "\nunsupported: " + r.Unsupported
		}
		return "passthrough: " + r.Reason
	}
	return r.Plan.String()
}

// checkParses checks that every SQL a result emits parses.
func checkParses(t testing.TB, where string, r Result) {
	if r.Plan == nil {
		return
	}
	for _, s := range r.Plan.Statements() {
		if err := syntax.Check(s); err != nil {
			t.Errorf("%s: emitted SQL does not parse: %v\n%s", where, err, s)
		}
		if missing := unboundColumns(s); len(missing) > 0 {
			t.Errorf("%s: the statement reads %v of %s, which does not hold them:\n%s", where, missing, plan.BoundsRelation, s)
		}
	}
}

// unboundColumns lists the columns a statement reads from
// plan.BoundsRelation that its definition does not hold.
func unboundColumns(sql string) []string {
	def, _, ok := strings.Cut(sql, plan.LogRelation+" AS (")
	if !ok {
		return nil
	}
	var missing []string
	for _, m := range boundsRefRE.FindAllStringSubmatch(sql, -1) {
		if !strings.Contains(def, "AS "+m[1]+",") && !strings.Contains(def, "AS "+m[1]+" FROM") && !strings.Contains(def, "AS "+m[1]+")") {
			missing = append(missing, m[1])
		}
	}
	return missing
}

var boundsRefRE = regexp.MustCompile(`\(SELECT (\w+) FROM ` + plan.BoundsRelation + `\)`)

func goldenFiles(t testing.TB) []string {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	sort.Strings(files)
	return files
}

func TestGolden(t *testing.T) {
	snap := testCatalog()
	total, passthrough := 0, 0
	for _, file := range goldenFiles(t) {
		cases, comments := readGolden(t, file)
		var out strings.Builder
		for i, c := range cases {
			for _, l := range comments[i] {
				out.WriteString(l + "\n")
			}
			r := Rewrite(c.sql, c.snapshot(snap), c.session(t))
			got := output(r)
			where := fmt.Sprintf("%s:%d", c.file, c.line)
			checkParses(t, where, r)
			if r.Plan == nil {
				passthrough++
			}
			total++
			if !*rewriteGolden && got != c.expected {
				t.Errorf("%s:\n%s\n--- got:\n%s\n--- want:\n%s", where, c.sql, got, c.expected)
			}
			fmt.Fprintf(&out, "%s\n%s\n----\n%s\n\n", c.cmd, c.sql, got)
		}
		for _, l := range comments[len(cases)] {
			out.WriteString(l + "\n")
		}
		if *rewriteGolden {
			if err := os.WriteFile(file, []byte(strings.TrimSuffix(out.String(), "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d golden cases, %d passthrough", total, passthrough)
	if total < 150 || passthrough < 50 {
		t.Errorf("golden corpus has %d cases (%d passthrough); want at least 150 (50)", total, passthrough)
	}
}

// testCatalog is the catalog every golden case is planned against.
func testCatalog() *catalog.Snapshot {
	wm := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	rows := catalog.Measure{Column: "row_count", Aggregate: catalog.Count, Expression: "*"}
	hll := func(col, typ string) catalog.Measure {
		return catalog.Measure{Column: "distinct_" + col, Aggregate: catalog.HLL, Expression: col, Type: typ, Log2m: 14, Regwidth: 5, Hash: "xxhash64"}
	}
	theta := func(col, typ string) catalog.Measure {
		return catalog.Measure{Column: "theta_" + col, Aggregate: catalog.Theta, Expression: col, Type: typ, Log2m: 12, Hash: "murmur3_128_9001"}
	}
	part := func(k catalog.Aggregate, col, typ string) catalog.Measure {
		return catalog.Measure{Column: string(k) + "_" + col, Aggregate: k, Expression: col, Type: typ}
	}
	topk := func(col, typ string) catalog.Measure {
		return catalog.Measure{Column: "topk_" + col, Aggregate: catalog.TopK, Expression: col, Type: typ, Log2m: 10}
	}
	return catalog.NewSnapshot([]*catalog.Rollup{
		{
			Name: "events_daily", Source: catalog.Table{Schema: "public", Name: "events"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "events_daily"},
			TimeColumn: "created_at", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "country", Type: "text", DistinctValues: 20}, {Column: "device", Type: "text", DistinctValues: 3},
				{Column: "app_version", Type: "integer", DistinctValues: 12}},
			Measures: []catalog.Measure{rows, hll("user_id", "bigint"), hll("session_id", "uuid"),
				part(catalog.Sum, "revenue", "numeric(12,2)"), part(catalog.Min, "revenue", "numeric(12,2)"),
				part(catalog.Max, "revenue", "numeric(12,2)"), part(catalog.Count, "revenue", "bigint"),
				part(catalog.Sum, "quantity", "integer"), theta("user_id", "bigint"), theta("session_id", "uuid"),
				topk("user_id", "bigint"), topk("session_id", "uuid")},
			NotNull:       []string{"id", "user_id", "session_id", "created_at"},
			SourceColumns: []string{"id", "created_at", "user_id", "session_id", "country", "device", "app_version", "revenue", "quantity"},
			Watermark:     wm, Version: 7, Rows: 54000,
			Levels: []catalog.Level{
				{Grain: catalog.Month, Table: catalog.Table{Schema: "pgsketch_rollups", Name: "events_daily_month"}},
				{Grain: catalog.Week, Table: catalog.Table{Schema: "pgsketch_rollups", Name: "events_daily_week"}},
			},
			Inserts: &catalog.Table{Schema: "pgsketch", Name: "inserts_events_daily"}, CaptureInPlace: true,
			FirstSeen: &catalog.FirstSeen{Key: "user_id", Built: true},
		},
		{
			Name: "events_hourly", Source: catalog.Table{Schema: "public", Name: "events"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "events_hourly"},
			TimeColumn: "created_at", TimeType: catalog.Timestamptz, Grain: catalog.Hour, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "country", Type: "text"}},
			Measures:   []catalog.Measure{rows, hll("user_id", "bigint")},
			Watermark:  wm.Add(5 * time.Hour), LateWindow: 3 * time.Hour, Version: 12, Rows: 1200000,
			SourceColumns: []string{"id", "created_at", "user_id", "session_id", "country", "device", "app_version", "revenue", "quantity"},
		},
		{
			Name: "visits_daily", Source: catalog.Table{Schema: "public", Name: "visits"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "visits_daily"},
			TimeColumn: "visited_at", TimeType: catalog.Timestamp, Grain: catalog.Day, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "site", Type: "text"}},
			Measures:   []catalog.Measure{rows, hll("visitor_id", "bigint"), theta("visitor_id", "bigint")},
			Watermark:  wm, Version: 4, Rows: 900,
			FirstSeen: &catalog.FirstSeen{Key: "visitor_id", Built: true},
		},
		{
			Name: "secrets_daily", Source: catalog.Table{Schema: "public", Name: "secrets"}, SourceRLS: true,
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "secrets_daily"},
			TimeColumn: "created_at", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "tenant", Type: "text"}},
			Measures:   []catalog.Measure{rows, hll("user_id", "bigint")},
			Watermark:  wm, Version: 2, Rows: 100,
		},
		{
			Name: "pageviews_weekly", Source: catalog.Table{Schema: "analytics", Name: "pageviews"},
			Table:      catalog.Table{Schema: "analytics", Name: "pageviews_weekly"},
			TimeColumn: "viewed_at", TimeType: catalog.Timestamp, Grain: catalog.Week, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "path", Type: "text"}, {Column: "referrer", Type: "text"}},
			Measures:   []catalog.Measure{rows, hll("visitor_id", "text"), theta("visitor_id", "text"), topk("visitor_id", "text")},
			Watermark:  time.Date(2024, 5, 27, 0, 0, 0, 0, time.UTC), Version: 3, Rows: 8000,
		},
		{
			Name: "taps_daily", Source: catalog.Table{Schema: "public", Name: "taps"}, Distributed: true, LoggedCheck: true,
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "taps_daily"},
			TimeColumn: "tapped_at", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "country", Type: "text", DistinctValues: 20}},
			Measures:   []catalog.Measure{rows, hll("user_id", "bigint")},
			Watermark:  wm, Version: 3, Rows: 3000,
			FirstSeen: &catalog.FirstSeen{Key: "user_id", Built: true},
		},
		{
			Name: "orders_monthly", Source: catalog.Table{Schema: "public", Name: "orders"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "orders_monthly"},
			TimeColumn: "order_date", TimeType: catalog.Date, Grain: catalog.Month, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "status", Type: "text"}, {Column: "store_id", Type: "integer"}},
			Measures: []catalog.Measure{rows, hll("customer_id", "integer"), part(catalog.Sum, "amount", "integer"),
				part(catalog.Max, "amount", "integer"), part(catalog.Sum, "weight", "double precision"),
				part(catalog.Sum, "tax", "real"), part(catalog.Max, "weight", "double precision")},
			Watermark: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), Version: 2, Rows: 300,
		},
		{
			Name: "shipments_daily", Source: catalog.Table{Schema: "public", Name: "shipments"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "shipments_daily"},
			TimeColumn: "shipped_on", TimeType: catalog.Date, Grain: catalog.Day, TimeZone: "UTC",
			Measures:  []catalog.Measure{rows, hll("customer_id", "integer")},
			Watermark: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), Version: 4, Rows: 150,
			FirstSeen: &catalog.FirstSeen{Key: "customer_id", Built: true},
			Levels: []catalog.Level{
				{Grain: catalog.Month, Table: catalog.Table{Schema: "pgsketch_rollups", Name: "shipments_daily_month"}},
				{Grain: catalog.Week, Table: catalog.Table{Schema: "pgsketch_rollups", Name: "shipments_daily_week"}},
			},
		},
		{
			Name: "signups_berlin", Source: catalog.Table{Schema: "public", Name: "signups"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "signups_berlin"},
			TimeColumn: "signed_up_at", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "Europe/Berlin",
			Dimensions: []catalog.Dimension{{Column: "plan", Type: "text"}},
			Measures:   []catalog.Measure{rows, hll("email", "text")},
			Watermark:  time.Date(2024, 5, 31, 22, 0, 0, 0, time.UTC), Version: 1, Rows: 700,
			FirstSeen: &catalog.FirstSeen{Key: "email"},
		},
		{
			Name: "arrivals_havana", Source: catalog.Table{Schema: "public", Name: "arrivals"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "arrivals_havana"},
			TimeColumn: "arrived_at", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "America/Havana",
			Dimensions:    []catalog.Dimension{{Column: "gate", Type: "text"}},
			Measures:      []catalog.Measure{rows, hll("guest_id", "bigint")},
			SourceColumns: []string{"arrived_at", "gate", "guest_id"},
			Watermark:     time.Date(2024, 12, 1, 5, 0, 0, 0, time.UTC), Version: 1, Rows: 300,
		},
		{
			Name: "clicks_daily", Source: catalog.Table{Schema: "public", Name: "clicks"},
			Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "clicks_daily"},
			TimeColumn: "clicked_at", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "campaign", Type: "text"}},
			Measures:   []catalog.Measure{rows, hll("user_id", "bigint")},
		},
		{
			Name: "Mixed Case", Source: catalog.Table{Schema: "Sales", Name: "Deals"},
			Table:      catalog.Table{Schema: "Sales", Name: "Deals by Day"},
			TimeColumn: "Closed At", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "UTC",
			Dimensions: []catalog.Dimension{{Column: "Region", Type: "text"}},
			Measures:   []catalog.Measure{rows, {Column: "distinct Account", Aggregate: catalog.HLL, Expression: "Account Id", Type: "bigint", Log2m: 12, Regwidth: 5, Hash: "xxhash64"}},
			Watermark:  wm, Version: 1, Rows: 10,
		},
	}).WithHLL(catalog.Extension{Schema: "public", Version: "2.17"})
}
