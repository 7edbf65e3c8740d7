package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// splitCase is one rollup of the time-split differential: its own source
// table (so that a query has one rollup to pick), a zone, a grain, a time
// column type, levels, and the instants (UTC) around which rows lie and
// bounds are drawn: clock changes of the zone (or of the session zones, for
// timestamp and date columns, whose comparisons with timestamptz bounds
// convert in the session's zone).
type splitCase struct {
	name, zone, grain, typ string
	levels                 []string
	years                  []int       // clock changes of these years are instants
	extra                  []string    // more instants, UTC
	sessZones              []string    // session zones besides the rollup's and UTC
	wallZone               string      // timestamp/date columns: rows are wall times of this zone's clock changes
	instants               []time.Time // filled in
}

// clockChanges are the instants in year y at which zone's UTC offset changes
// (Go's zone database; PostgreSQL's is the same for these years).
func clockChanges(t *testing.T, zone string, y int) []time.Time {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	from := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(y+1, 1, 1, 0, 0, 0, 0, time.UTC)
	off := func(x time.Time) int { _, o := x.In(loc).Zone(); return o }
	for x := from; x.Before(to); x = x.Add(time.Hour) {
		if off(x) == off(x.Add(time.Hour)) {
			continue
		}
		lo, hi := x, x.Add(time.Hour) // off(lo) != off(hi)
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if off(mid) == off(lo) {
				lo = mid
			} else {
				hi = mid
			}
		}
		out = append(out, hi)
	}
	return out
}

var splitCases = []splitCase{
	// Clock changes at midnight.
	{name: "santiago_day", zone: "America/Santiago", grain: "day", typ: "timestamptz", levels: []string{"week", "month"}, years: []int{2025}},
	{name: "azores_hour", zone: "Atlantic/Azores", grain: "hour", typ: "timestamptz", levels: []string{"day", "week", "month"}, years: []int{2025}},
	{name: "havana_hour", zone: "America/Havana", grain: "hour", typ: "timestamptz", levels: []string{"day", "month"}, years: []int{2020}},
	{name: "beirut_day", zone: "Asia/Beirut", grain: "day", typ: "timestamptz", levels: []string{"week"}, years: []int{2025}},
	{name: "asuncion_month", zone: "America/Asuncion", grain: "month", typ: "timestamptz", years: []int{2023}},
	{name: "tehran_week", zone: "Asia/Tehran", grain: "week", typ: "timestamptz", years: []int{2021}},
	// Half-hour and 45-minute offsets.
	{name: "lordhowe_hour", zone: "Australia/Lord_Howe", grain: "hour", typ: "timestamptz", levels: []string{"day"}, years: []int{2025}},
	{name: "kolkata_hour", zone: "Asia/Kolkata", grain: "hour", typ: "timestamptz", levels: []string{"day", "month"}, extra: []string{"2025-03-31 18:30", "2025-05-04 18:00"}},
	{name: "kathmandu_hour", zone: "Asia/Kathmandu", grain: "hour", typ: "timestamptz", levels: []string{"day"}, years: []int{1985}},
	{name: "adelaide_hour", zone: "Australia/Adelaide", grain: "hour", typ: "timestamptz", levels: []string{"day", "month"}, years: []int{2025}},
	{name: "stjohns_hour", zone: "America/St_Johns", grain: "hour", typ: "timestamptz", levels: []string{"day"}, years: []int{2025, 2010}},
	{name: "stjohns_day", zone: "America/St_Johns", grain: "day", typ: "timestamptz", levels: []string{"week", "month"}, years: []int{2010, 2009}},
	{name: "chatham_hour", zone: "Pacific/Chatham", grain: "hour", typ: "timestamptz", levels: []string{"day"}, years: []int{2025}},
	// A zone that skipped a day.
	{name: "apia_day", zone: "Pacific/Apia", grain: "day", typ: "timestamptz", levels: []string{"week", "month"}, years: []int{2011}},
	{name: "apia_hour", zone: "Pacific/Apia", grain: "hour", typ: "timestamptz", levels: []string{"day"}, years: []int{2011}},
	// Fixed offsets.
	{name: "gmtp5_week", zone: "Etc/GMT+5", grain: "week", typ: "timestamptz", extra: []string{"2025-03-03 05:00", "2025-06-01 04:00"}},
	{name: "gmtm14_day", zone: "Etc/GMT-14", grain: "day", typ: "timestamptz", levels: []string{"week", "month"}, extra: []string{"2025-02-28 10:00", "2025-06-30 09:30"}},
	{name: "utc_month", zone: "UTC", grain: "month", typ: "timestamptz", extra: []string{"2025-03-01 00:00", "2025-12-31 23:30"}},
	// timestamp and date columns, with wall times around clock changes of
	// the session zones.
	{name: "ts_hour", grain: "hour", typ: "timestamp", levels: []string{"day"}, wallZone: "America/New_York", years: []int{2025},
		sessZones: []string{"America/New_York", "Australia/Lord_Howe"}},
	{name: "ts_day", grain: "day", typ: "timestamp", levels: []string{"week", "month"}, wallZone: "America/Santiago", years: []int{2025},
		sessZones: []string{"America/Santiago", "Atlantic/Azores"}},
	{name: "ts_week", grain: "week", typ: "timestamp", wallZone: "Pacific/Apia", years: []int{2011},
		sessZones: []string{"Pacific/Apia"}},
	{name: "date_day", grain: "day", typ: "date", levels: []string{"week", "month"}, wallZone: "America/Havana", years: []int{2020},
		sessZones: []string{"America/Havana", "Pacific/Apia"}},
	{name: "date_month", grain: "month", typ: "date", wallZone: "America/Asuncion", years: []int{2023},
		sessZones: []string{"America/Asuncion"}},
}

// otherZones are session zones unrelated to the rollup's.
var otherZones = []string{"America/New_York", "Asia/Kolkata", "Pacific/Chatham", "Atlantic/Azores", "Etc/GMT-14"}

const pgTime = "2006-01-02 15:04:05"

type splitQuery struct {
	sess   string
	sql    string
	params []any
	shape  string
}

// splitGen draws queries for a case.
type splitGen struct {
	r *rand.Rand
	c *splitCase
}

func (g *splitGen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }

// instant draws a time near one of the case's instants.
func (g *splitGen) instant() time.Time {
	x := g.c.instants[g.r.Intn(len(g.c.instants))]
	var d time.Duration
	switch g.r.Intn(6) {
	case 0:
		d = 0
	case 1:
		m, _ := strconv.Atoi(g.pick([]string{"-1", "1", "-15", "15", "-30", "30", "-45", "45", "-60", "60", "-90", "90", "-120", "120", "-59", "31", "-31", "29"}))
		d = time.Duration(m) * time.Minute
	case 2:
		d = time.Duration(g.r.Intn(6*60)-3*60) * time.Minute
	case 3:
		d = time.Duration(g.r.Intn(96)-48) * time.Hour
	case 4:
		d = time.Duration(g.r.Intn(48*60)-24*60) * time.Minute
	default:
		if g.c.grain == "week" || g.c.grain == "month" || len(g.c.levels) > 0 {
			d = time.Duration(g.r.Intn(80)-40)*24*time.Hour + time.Duration(g.r.Intn(3)-1)*time.Hour
		} else {
			d = time.Duration(g.r.Intn(8*60)-4*60) * time.Minute
		}
	}
	return x.Add(d)
}

// literal is SQL (or a parameter's text when param) standing for a time
// near x, as a bound of the case's column, in session zone sess.
func (g *splitGen) literal(x time.Time, sess string) (sql string, param string, isParam bool) {
	wall := g.c.zone
	if g.c.typ != "timestamptz" {
		wall = g.c.wallZone
	}
	loc, _ := time.LoadLocation(wall)
	sloc, _ := time.LoadLocation(sess)
	var text, typ string
	switch g.c.typ {
	case "timestamptz":
		switch g.r.Intn(9) {
		case 0, 1:
			text = x.UTC().Format(pgTime) + "+00"
		case 2:
			off := g.pick([]string{"+05:30", "-03:00", "+13:45", "-09:30", "+14"})
			h, m := 0, 0
			sign := 1
			s := off
			if s[0] == '-' {
				sign = -1
			}
			parts := strings.Split(s[1:], ":")
			h, _ = strconv.Atoi(parts[0])
			if len(parts) > 1 {
				m, _ = strconv.Atoi(parts[1])
			}
			fz := time.FixedZone("x", sign*(h*3600+m*60))
			text = x.In(fz).Format(pgTime) + off
		case 3:
			text = x.In(sloc).Format(pgTime) // read in the session's zone
		case 4:
			text = x.In(loc).Format(pgTime) // the rollup zone's wall time, read in the session's
		case 5:
			text = x.In(sloc).Format("2006-01-02")
			if g.r.Intn(2) == 0 {
				typ = "date"
			}
		case 6:
			text = x.UTC().Format(pgTime) + "+00"
			typ = "timestamptz"
		case 7:
			text = x.In(loc).Format(pgTime)
			typ = "timestamp"
		default:
			text = x.In(sloc).Format("2006-01-02 15:04")
		}
	case "timestamp":
		switch g.r.Intn(7) {
		case 0, 1, 2:
			text = x.In(loc).Format(pgTime)
		case 3:
			text = x.In(loc).Format(pgTime)
			typ = "timestamp"
		case 4:
			text = x.In(loc).Format("2006-01-02")
			typ = "date"
		default:
			// A timestamptz bound: PostgreSQL compares the column converted
			// to timestamptz in the session's zone.
			text = x.UTC().Format(pgTime) + "+00"
			typ = "timestamptz"
		}
	case "date":
		switch g.r.Intn(7) {
		case 0, 1, 2:
			text = x.In(loc).Format("2006-01-02")
		case 3:
			text = x.In(loc).Format("2006-01-02")
			typ = "date"
		case 4:
			text = x.In(loc).Format("2006-01-02 15:04")
			typ = "timestamp"
		default:
			text = x.UTC().Format(pgTime) + "+00"
			typ = "timestamptz"
		}
	}
	if g.r.Intn(40) == 0 {
		text, typ = g.pick([]string{"-infinity", "infinity"}), ""
	}
	if g.r.Intn(5) == 0 {
		if typ != "" {
			return "$?::" + typ, text, true
		}
		return "$?", text, true
	}
	q := "'" + text + "'"
	if typ != "" {
		q = typ + " " + q
	}
	return q, "", false
}

func (g *splitGen) query() splitQuery {
	c := g.c
	sess := c.zone
	if c.typ != "timestamptz" {
		sess = g.pick(append([]string{"UTC"}, c.sessZones...))
	} else {
		switch g.r.Intn(10) {
		case 0, 1:
			sess = "UTC"
		case 2:
			sess = g.pick(otherZones)
		}
	}
	var params []any
	var shape []string
	lit := func(x time.Time) string {
		s, p, isParam := g.literal(x, sess)
		if isParam {
			params = append(params, p)
			s = strings.Replace(s, "$?", "$"+strconv.Itoa(len(params)), 1)
			shape = append(shape, "param")
		}
		return s
	}
	var where []string
	lo := g.instant()
	widths := []time.Duration{0, time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 24 * time.Hour, 3 * 24 * time.Hour,
		10 * 24 * time.Hour, 40 * 24 * time.Hour}
	hi := lo.Add(widths[g.r.Intn(len(widths))])
	if g.r.Intn(8) == 0 {
		hi = lo.Add(-time.Duration(g.r.Intn(120)) * time.Minute) // maybe empty
	}
	switch k := g.r.Intn(12); {
	case k < 2:
		op := g.pick([]string{">=", ">"})
		where = append(where, "t "+op+" "+lit(lo))
		shape = append(shape, "lower "+op)
	case k < 4:
		op := g.pick([]string{"<", "<="})
		where = append(where, "t "+op+" "+lit(hi))
		shape = append(shape, "upper "+op)
	case k < 8:
		lop, hop := g.pick([]string{">=", ">"}), g.pick([]string{"<", "<="})
		where = append(where, "t "+lop+" "+lit(lo), "t "+hop+" "+lit(hi))
		shape = append(shape, "both "+lop+" "+hop)
	case k < 9:
		where = append(where, "t BETWEEN "+lit(lo)+" AND "+lit(hi))
		shape = append(shape, "between")
	case k < 10:
		where = append(where, "t = "+lit(lo))
		shape = append(shape, "equal")
	case k < 11:
		// reversed operands
		where = append(where, lit(lo)+" <= t", lit(hi)+" > t")
		shape = append(shape, "reversed")
	default:
		shape = append(shape, "no range")
	}
	if g.r.Intn(6) == 0 {
		where = append(where, "t IS NOT NULL")
	}
	sel := "count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total"
	from := " FROM " + c.name
	q := "SELECT " + sel + from
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if g.r.Intn(3) == 0 {
		key := g.groupKey(sess)
		q = "SELECT " + key + " AS b, " + sel + from
		if len(where) > 0 {
			q += " WHERE " + strings.Join(where, " AND ")
		}
		q += " GROUP BY 1 ORDER BY 1"
		shape = append(shape, "group by "+key)
	}
	if c.typ == "timestamptz" {
		if sess == c.zone {
			shape = append(shape, "session in the rollup's zone")
		} else {
			shape = append(shape, "session in another zone")
		}
	}
	return splitQuery{sess: sess, sql: q, params: params, shape: strings.Join(shape, ", ")}
}

// groupKey draws a GROUP BY key over the time column that a rollup of the
// case's grain may answer: date_trunc of a unit as coarse as the grain
// (in the rollup's zone, or the session's), of the wall clock in the
// rollup's zone, extract of a field, a cast to date, epoch buckets.
func (g *splitGen) groupKey(sess string) string {
	c := g.c
	grains := []string{"hour", "day", "week", "month"}
	i := map[string]int{"hour": 0, "day": 1, "week": 2, "month": 3}[c.grain]
	gr := grains[i+g.r.Intn(len(grains)-i)]
	if c.typ != "timestamptz" {
		switch g.r.Intn(4) {
		case 0:
			if c.grain == "hour" || c.grain == "day" {
				return "extract(" + g.pick(map[string][]string{"hour": {"hour", "day", "dow"}, "day": {"day", "dow", "month"}}[c.grain]) + " FROM t)"
			}
		case 1:
			if c.grain != "week" {
				return "date_part('month', t)"
			}
		}
		return fmt.Sprintf("date_trunc('%s', t)", gr)
	}
	switch g.r.Intn(8) {
	case 0, 1:
		return fmt.Sprintf("date_trunc('%s', t, '%s')", gr, c.zone)
	case 2:
		// In the session's zone: answered only when it is the rollup's.
		return fmt.Sprintf("date_trunc('%s', t)", gr)
	case 3:
		return fmt.Sprintf("date_trunc('%s', t AT TIME ZONE '%s')", gr, c.zone)
	case 4:
		fields := map[string][]string{"hour": {"hour", "day", "dow"}, "day": {"day", "dow", "doy"}, "week": {"week"}, "month": {"month", "quarter"}}[c.grain]
		return "extract(" + g.pick(fields) + " FROM t)"
	case 5:
		if c.grain == "hour" || c.grain == "day" {
			return "CAST(t AS date)"
		}
	case 6:
		if c.grain == "hour" {
			return fmt.Sprintf("floor(extract(epoch FROM t AT TIME ZONE '%s') / 3600)", c.zone)
		}
		if c.grain == "day" {
			return fmt.Sprintf("floor(extract(epoch FROM t AT TIME ZONE '%s') / 86400)", c.zone)
		}
	}
	return fmt.Sprintf("date_trunc('%s', t, '%s')", gr, c.zone)
}

func setupSplitCase(t *testing.T, conn *pgx.Conn, c *splitCase) {
	t.Helper()
	zone := c.zone
	if zone == "" {
		zone = "UTC"
	}
	wall := c.zone
	if c.typ != "timestamptz" {
		wall = c.wallZone
	}
	c.instants = nil
	for _, y := range c.years {
		c.instants = append(c.instants, clockChanges(t, wall, y)...)
	}
	for _, e := range c.extra {
		x, err := time.Parse("2006-01-02 15:04", e)
		if err != nil {
			t.Fatal(err)
		}
		c.instants = append(c.instants, x)
	}
	sort.Slice(c.instants, func(i, j int) bool { return c.instants[i].Before(c.instants[j]) })
	val := "v"
	switch c.typ {
	case "timestamp":
		val = fmt.Sprintf("(v AT TIME ZONE '%s')", wall)
	case "date":
		val = fmt.Sprintf("(v AT TIME ZONE '%s')::date", wall)
	}
	mustExec(t, conn, fmt.Sprintf(`CREATE TABLE %s (t %s, u bigint, amount numeric(12,2));
		CREATE INDEX ON %[1]s (t)`, c.name, c.typ))
	var ins []string
	for i, x := range c.instants {
		at := x.UTC().Format(pgTime) + "+00"
		// Every 7 minutes over two days around the instant.
		ins = append(ins, fmt.Sprintf(`INSERT INTO %s SELECT %s, (i * 7 + %d) %% 400, 1 + i %% 3 FROM (SELECT i, timestamptz '%s' + (i - 400) * interval '7 minutes' AS v FROM generate_series(0, 800) i) s`,
			c.name, val, i, at))
		// And every minute of the hour around it.
		ins = append(ins, fmt.Sprintf(`INSERT INTO %s SELECT %s, (i * 13 + %d) %% 400, 3 FROM (SELECT i, timestamptz '%s' + (i - 30) * interval '1 minute' + interval '17 seconds' AS v FROM generate_series(0, 60) i) s`,
			c.name, val, i, at))
		if c.grain == "week" || c.grain == "month" || len(c.levels) > 0 {
			// And every 3 h 17 min over 45 days either side.
			ins = append(ins, fmt.Sprintf(`INSERT INTO %s SELECT %s, (i * 11 + %d) %% 400, 1 FROM (SELECT i, timestamptz '%s' + (i - 330) * interval '197 minutes' AS v FROM generate_series(0, 660) i) s`,
				c.name, val, i, at))
		}
		if c.typ == "timestamp" {
			// Wall times the zone's clock skips or repeats, as a timestamp
			// column holds them: every 5 minutes of the three local hours
			// around the change.
			ins = append(ins, fmt.Sprintf(`INSERT INTO %s SELECT date_trunc('hour', timestamptz '%s' AT TIME ZONE '%s') + (i - 18) * interval '5 minutes', i %% 50, 2 FROM generate_series(0, 36) i`,
				c.name, at, wall))
		}
	}
	ins = append(ins, fmt.Sprintf(`INSERT INTO %s VALUES (NULL, 7, 3), (NULL, 8, 4), ('-infinity', 11, 1), ('infinity', 12, 1)`, c.name))
	mustExec(t, conn, strings.Join(ins, ";\n"))
	mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.create_rollup('%s', '%s', 't', grain => '%s', time_zone => '%s',
		distinct_columns => '{u}', sum_columns => '{amount}')`, c.name+"_r", c.name, c.grain, zone))
	for _, l := range c.levels {
		mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.add_rollup_level('%s', '%s')`, c.name+"_r", l))
	}
	refreshRollup(t, conn, c.name+"_r", refresh.Options{})
	// After the refresh: rows after the watermark (the tail), changed
	// buckets (rows updated, deleted and inserted around the first
	// instant), rows with no time.
	last := c.instants[len(c.instants)-1]
	first := c.instants[0]
	f := first.UTC().Format(pgTime) + "+00"
	step := "i * interval '13 minutes'"
	if c.typ == "date" {
		step = "i"
	}
	mustExec(t, conn, fmt.Sprintf(`INSERT INTO %[1]s SELECT m + %[9]s, 1100 + i, 6 FROM (SELECT max(t) AS m FROM %[1]s WHERE isfinite(t)) x, generate_series(1, 20) i;
		INSERT INTO %[1]s SELECT %[2]s, 1000 + i, 5 FROM (SELECT i, timestamptz '%[3]s' + interval '50 days' + i * interval '37 minutes' AS v FROM generate_series(0, 40) i) s;
		UPDATE %[1]s SET amount = amount + 10, u = u + 2000 WHERE t >= %[4]s AND t < %[5]s;
		DELETE FROM %[1]s WHERE t >= %[6]s AND t < %[7]s;
		INSERT INTO %[1]s SELECT %[2]s, 3000 + i, 7 FROM (SELECT i, timestamptz '%[8]s' + (i - 3) * interval '11 minutes' AS v FROM generate_series(0, 6) i) s;
		INSERT INTO %[1]s VALUES (NULL, 9, 5)`,
		c.name, val, last.UTC().Format(pgTime)+"+00",
		conv(c, wall, first.Add(-50*time.Minute)), conv(c, wall, first.Add(40*time.Minute)),
		conv(c, wall, first.Add(5*time.Hour)), conv(c, wall, first.Add(5*time.Hour+20*time.Minute)),
		f, step))
}

// conv is a literal of instant x as the case's column holds it.
func conv(c *splitCase, wall string, x time.Time) string {
	at := "timestamptz '" + x.UTC().Format(pgTime) + "+00'"
	switch c.typ {
	case "timestamp":
		return fmt.Sprintf("(%s AT TIME ZONE '%s')", at, wall)
	case "date":
		return fmt.Sprintf("(%s AT TIME ZONE '%s')::date", at, wall)
	}
	return at
}

// TestTimeSplitDifferential: randomized queries (a fixed seed, logged;
// PGSKETCH_SPLIT_SEED picks another, PGSKETCH_SPLIT_QUERIES the number per
// rollup, PGSKETCH_SPLIT_ONLY a list of rollups, PGSKETCH_SPLIT_DEBUG one
// query to explain) over rollups in zones with clock changes at midnight
// (Santiago, Azores, Havana, Beirut, Asuncion, Tehran), half-hour and
// 45-minute offsets (Lord Howe, Kolkata, Kathmandu, Adelaide, St John's,
// Chatham), a skipped day (Apia), fixed offsets (Etc/GMT+5, Etc/GMT-14) and
// UTC; by hour, day, week and month, with day, week and month levels; on
// timestamptz, timestamp and date columns; in sessions in the rollup's zone,
// UTC and others. Bounds: lower, upper, both, BETWEEN, =, reversed
// operands, literals with and without offsets, date literals, typed
// literals of the other time types, -infinity and infinity, parameters of
// the extended protocol; ranges inside one bucket and empty ones. Rows
// every minute around each clock change, every 7 minutes over two days and
// every 3 h 17 min over 90 days, at -infinity, infinity and NULL; after
// the refresh, rows after the watermark and in the last bucket, rows
// updated, deleted and inserted (changed buckets). GROUP BY date_trunc in
// the rollup's zone and the session's, of the wall clock, extract, ::date
// and epoch buckets. Every answer the proxy gives from a rollup (its
// NOTICE) must be PostgreSQL's (count and sum exactly, the distinct count
// within 5 standard errors); passthroughs are counted and their shapes
// logged.
//
// It fails: TestTimeSplitRegressions holds the wrong answers it finds, each
// in its smallest form, with their causes.
func TestTimeSplitDifferential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seed := int64(11) // finds all four kinds of wrong answers of splitRegressions
	if s := os.Getenv("PGSKETCH_SPLIT_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	n := 25
	if s := os.Getenv("PGSKETCH_SPLIT_QUERIES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d (PGSKETCH_SPLIT_SEED=%d repeats it), %d queries per rollup", seed, seed, n)
	begin := time.Now()
	db, conn := catalogDB(t)
	only := os.Getenv("PGSKETCH_SPLIT_ONLY")
	var cases []*splitCase
	for i := range splitCases {
		c := splitCases[i]
		if only != "" && !strings.Contains(","+only+",", ","+c.name+",") {
			continue
		}
		setupSplitCase(t, conn, &c)
		cases = append(cases, &c)
	}
	t.Logf("%d rollups set up in %v", len(cases), time.Since(begin).Round(time.Millisecond))
	p := startProxy(t, server.adminURL, "--approx", "on")
	type conns struct{ proxied, direct, proxiedX, directX *noticeConn }
	byZone := map[string]*conns{}
	connsFor := func(zone string) *conns {
		if c := byZone[zone]; c != nil {
			return c
		}
		opt := "&options=" + strings.NewReplacer(" ", "%20", "=", "%3D", "/", "%2F", "+", "%2B").Replace("-c TimeZone="+zone)
		c := &conns{
			proxied:  connectSimple(t, p.URL(db.DSN)+opt),
			direct:   connectSimple(t, db.DSN+opt),
			proxiedX: connectMode(t, p.URL(db.DSN)+opt, pgx.QueryExecModeCacheStatement),
			directX:  connectMode(t, db.DSN+opt, pgx.QueryExecModeCacheStatement),
		}
		byZone[zone] = c
		return c
	}
	wrong, answered, passed := 0, 0, 0
	passShapes := map[string]int{}
	for _, c := range cases {
		// Each rollup draws from its own source, seeded by its name, so
		// that PGSKETCH_SPLIT_ONLY repeats its queries.
		h := int64(0)
		for _, b := range []byte(c.name) {
			h = h*31 + int64(b)
		}
		g := &splitGen{r: rand.New(rand.NewSource(seed ^ h)), c: c}
		for i := 0; i < n; i++ {
			q := g.query()
			if dq := os.Getenv("PGSKETCH_SPLIT_DEBUG"); dq != "" {
				// One query of this rollup instead: session|sql|param...
				if i > 0 {
					break
				}
				f := strings.Split(dq, "|")
				q = splitQuery{sess: f[0], sql: f[1]}
				for _, a := range f[2:] {
					q.params = append(q.params, a)
				}
				cs := connsFor(q.sess)
				pc := cs.proxied
				if len(q.params) > 0 {
					pc = cs.proxiedX
				}
				debugSplitQuery(t, conn, pc, c.name+"_r", q)
			}
			cs := connsFor(q.sess)
			pc, dc := cs.proxied, cs.direct
			if len(q.params) > 0 {
				pc, dc = cs.proxiedX, cs.directX
			}
			want, err := dc.query(ctx, q.sql, q.params...)
			if err != nil {
				t.Errorf("%s: direct: %s %v: %v", c.name, q.sql, q.params, err)
				continue
			}
			got, err := pc.query(ctx, q.sql, q.params...)
			if err != nil {
				t.Errorf("%s: proxy: %s %v: %v", c.name, q.sql, q.params, err)
				continue
			}
			fromRollup := false
			for _, m := range got.notices {
				if strings.Contains(m, "rollup "+c.name+"_r") && !strings.Contains(m, "exactly") {
					fromRollup = true
				}
			}
			if !fromRollup {
				passed++
				passShapes[c.name+": "+q.shape]++
				continue
			}
			answered++
			errs, err := compareRollupAnswer(got, want)
			bad := err != nil
			for _, e := range errs {
				if e > 5 {
					bad = true
				}
			}
			if bad {
				wrong++
				g, w := diffRows(got, want)
				t.Errorf("%s (%s %s, zone %s, session %s): %s %v\n  proxy  %v\n  exact  %v\n  %q", c.name, c.typ, c.grain, c.zone, q.sess,
					q.sql, q.params, g, w, got.notices)
			}
		}
	}
	t.Logf("%d answered from rollups (%d wrong), %d passed through, in %v", answered, wrong, passed, time.Since(begin).Round(time.Millisecond))
	var keys []string
	for k := range passShapes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("passed through: %s (%d)", k, passShapes[k])
	}
}

// diffRows are the rows of got and want that the other lacks (all of them
// when there are few), to print.
func diffRows(got, want *answer) (g, w [][]string) {
	if len(got.rows) <= 3 && len(want.rows) <= 3 {
		return got.rows, want.rows
	}
	count := map[string]int{}
	for _, r := range want.rows {
		count[fmt.Sprint(r)]++
	}
	for _, r := range got.rows {
		count[fmt.Sprint(r)]--
	}
	for _, r := range got.rows {
		if count[fmt.Sprint(r)] < 0 {
			g = append(g, r)
		}
	}
	for _, r := range want.rows {
		if count[fmt.Sprint(r)] > 0 {
			w = append(w, r)
		}
	}
	return g, w
}

// splitRegression is one wrong answer found by the differential, kept as
// its smallest reproduction: a table of a few rows, a rollup, and a query
// asked in a session zone.
type splitRegression struct {
	name    string
	typ     string   // of column t
	rows    []string // values of t
	rollup  string   // create_rollup's arguments after the time column
	levels  []string
	session string
	query   string
	params  []any
}

// splitRegressions are the wrong answers TestTimeSplitDifferential found,
// each in its smallest form, of four kinds.
//
// Levels where a midnight repeats (azores_level_*, havana_month_level_lost,
// stjohns_level_lost). A level bucket is date_trunc(level grain, bucket AT
// TIME ZONE zone) AT TIME ZONE zone of the rollup's bucket (level_begin);
// where local midnight happens twice (Azores and Havana: 01:00 back to
// 00:00; St John's before 2011: 00:01 back to 23:01) PostgreSQL takes the
// later instant, so the day (month) starts at the second midnight, after
// the hourly bucket of the first midnight hour it holds (00:00 UTC on
// 2025-10-26 in the Azores, 04:00 UTC on 2020-11-01 in Havana, 02:30 UTC on
// 2010-11-07 in St John's). levelFrom splits rollup rows from level rows by
// the hour bucket's start (level buckets in [llo, lhi), rollup rows with
// bucket < llo or >= lhi), which assumes every rollup bucket starts at or
// after its level bucket: that hour is read twice when its level bucket is
// in the range and the range starts before it (rollup row < llo, and the
// level row), and lost when its level bucket is the one at lhi (neither
// < lhi in the level nor >= lhi in the rollup; the upper edge reads only
// buckets >= BucketsTo).
//
// Hour buckets whose start is not their rows' wall-clock hour or day
// (lordhowe_*, chatham_extract_hour, stjohns_group_day,
// kathmandu_group_day). date_trunc('hour', t, zone) keeps each row's UTC
// offset, so where the clocks change by 30 or 45 minutes, or at 00:01, or
// at midnight by 15 minutes, an hourly bucket starts at an instant that
// reads, in the zone, as another hour or day than its rows: Lord Howe's
// rows of 02:30-03:00 +11 on 2025-10-05 start at 02:00 +11 = 15:00 UTC,
// which is 01:30 +10:30; the second 01:30-02:00 +10:30 on 2025-04-06 start
// at 14:30 UTC = 01:30 +11; Chatham's bucket 13:15 UTC on 2025-09-28 holds
// wall hours 2 (+12:45) and 3 (+13:45); St John's bucket 02:30 UTC on
// 2010-11-07 holds 00:00-00:01 NDT of the 7th and 23:01-24:00 NST of the
// 6th; Kathmandu's bucket 18:15 UTC on 1985-12-31 (23:45 +05:30) holds
// 00:15-01:00 +05:45 of 1986-01-01. The rewriter (bucketConstant,
// unitNests) takes date_trunc of any unit from hour up, extract(hour, day,
// dow, ...), ::date and wall-clock epoch buckets as constant within an
// hour bucket and evaluates them on its start, for GROUP BY keys and
// pushed filters alike; date_trunc('hour', ...) of a bucket start is not
// even the bucket start again (15:00 UTC gives 14:30 UTC).
//
// Days that are not monotone in time (stjohns_day_lower). In St John's
// before 2011 the clocks went back at 00:01, so the hour repeated
// straddles midnight: the first minute of 2010-11-07 (02:30-02:31 UTC)
// belongs to that day, which starts at the second midnight (03:30 UTC),
// yet it precedes the last hour of the 6th (02:31-03:30 UTC). For a lower
// bound in that hour, BucketsFrom = next(floor(bound)) is the 7th, read
// whole from the rollup with its first minute, before the bound (edges
// assumes buckets are monotone in time).
//
// timestamptz bounds on timestamp and date columns (ts_tstz_*,
// date_tstz_apia). PostgreSQL compares timestamp_col op timestamptz by
// casting the column to timestamptz in the session's zone; typedBound casts
// the bound to the column's type instead. Where the session's clock skips,
// the two are not inverse: a wall time in the gap (02:30 on 2025-03-09 in
// New York, any time of 2011-12-30 in Apia) becomes an instant after the
// gap (07:30 UTC, after 03:00's 07:00 UTC). A lower bound of 07:00 UTC casts
// to 03:00, a bucket start, so BucketsFrom is 03:00 and the lower edge
// (03:00 < 03:00) is not read: the 02:00 bucket, which PostgreSQL counts
// (02:30 is 07:30 UTC), is lost. An upper bound of 07:15 UTC casts to 03:15,
// the 02:00 bucket is read whole from the rollup, and 02:30 counted though
// PostgreSQL excludes it. The dates 2011-12-30 and 2011-12-31 both become
// 2011-12-30 10:00 UTC in Apia. (The same non-monotone cast lets a btree
// range scan with the cross-type operators disagree with a sequential scan:
// with seed 12, ts_week in Apia, t <= $1::timestamptz '2011-12-31
// 04:41+00' answers 3885, PostgreSQL 4102; the fetch's base arm, t >= hi
// AND t <= $1, read by the index, misses 217 rows a sequential scan finds.)
var splitRegressions = []splitRegression{
	// Levels where a midnight repeats: 00:30 UTC on 2025-10-26 is in the hour
	// bucket 00:00 UTC, held by the day level's 2025-10-26 (01:00 UTC), and
	// read again as a rollup row before llo (proxy 5 rows, PostgreSQL 4).
	{name: "azores_level_double", typ: "timestamptz",
		rows:   []string{"2025-10-25 12:00+00", "2025-10-26 00:30+00", "2025-10-26 12:00+00", "2025-10-27 12:00+00", "2025-10-28 12:00+00"},
		rollup: "grain => 'hour', time_zone => 'Atlantic/Azores'", levels: []string{"day"}, session: "UTC",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t >= '2025-10-25 12:00+00' AND t < '2025-10-28 00:00+00'"},
	// The same hour, lost: its day is the level bucket at lhi (2 rows for 3).
	{name: "azores_level_lost", typ: "timestamptz",
		rows:   []string{"2025-10-20 12:00+00", "2025-10-25 12:00+00", "2025-10-26 00:30+00", "2025-10-26 12:00+00"},
		rollup: "grain => 'hour', time_zone => 'Atlantic/Azores'", levels: []string{"day"}, session: "UTC",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t < '2025-10-26 01:00+00'"},
	// A month level: November 2020 starts at Havana's second midnight.
	{name: "havana_month_level_lost", typ: "timestamptz",
		rows:   []string{"2020-10-10 12:00+00", "2020-10-31 12:00+00", "2020-11-01 04:30+00", "2020-11-01 12:00+00"},
		rollup: "grain => 'hour', time_zone => 'America/Havana'", levels: []string{"month"}, session: "America/Havana",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t < '2020-11-01 05:00+00'"},
	// St John's 00:01 change: the hour bucket 02:30 UTC is in the day level's
	// 2010-11-07 (03:30 UTC).
	{name: "stjohns_level_lost", typ: "timestamptz",
		rows:   []string{"2010-11-01 12:00+00", "2010-11-06 12:00+00", "2010-11-07 03:00+00", "2010-11-07 12:00+00"},
		rollup: "grain => 'hour', time_zone => 'America/St_Johns'", levels: []string{"day"}, session: "UTC",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t < '2010-11-07 03:30+00'"},
	// Hour buckets whose start is another wall-clock hour or day than their
	// rows'. The bucket 15:00 UTC (02:00 +11) groups as 14:30 UTC.
	{name: "lordhowe_group_hour_spring", typ: "timestamptz",
		rows:   []string{"2025-10-04 15:10+00", "2025-10-04 15:40+00"},
		rollup: "grain => 'hour', time_zone => 'Australia/Lord_Howe'", session: "UTC",
		query: "SELECT date_trunc('hour', t, 'Australia/Lord_Howe') AS b, count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s GROUP BY 1 ORDER BY 1"},
	// The bucket 14:30 UTC (01:00 +10:30) groups as 14:00 UTC.
	{name: "lordhowe_group_hour_fall", typ: "timestamptz",
		rows:   []string{"2025-04-05 14:40+00", "2025-04-05 15:10+00"},
		rollup: "grain => 'hour', time_zone => 'Australia/Lord_Howe'", session: "UTC",
		query: "SELECT date_trunc('hour', t, 'Australia/Lord_Howe') AS b, count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s GROUP BY 1 ORDER BY 1"},
	// The same as a filter: no row for PostgreSQL's one.
	{name: "lordhowe_filter_hour", typ: "timestamptz",
		rows:   []string{"2025-10-04 15:10+00", "2025-10-04 15:40+00"},
		rollup: "grain => 'hour', time_zone => 'Australia/Lord_Howe'", session: "UTC",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE date_trunc('hour', t, 'Australia/Lord_Howe') = '2025-10-04 15:00+00'"},
	// Wall hours 2 and 3 in one bucket, 13:15 UTC: both counted as hour 2.
	{name: "chatham_extract_hour", typ: "timestamptz",
		rows:   []string{"2025-09-27 13:30+00", "2025-09-27 14:05+00"},
		rollup: "grain => 'hour', time_zone => 'Pacific/Chatham'", session: "Pacific/Chatham",
		query: "SELECT extract(hour FROM t) AS b, count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s GROUP BY 1 ORDER BY 1"},
	// 03:00 UTC on 2010-11-07 is 23:30 NST on the 6th, in the bucket 02:30 UTC
	// (00:00 NDT on the 7th): counted on the 7th.
	{name: "stjohns_group_day", typ: "timestamptz",
		rows:   []string{"2010-11-07 03:00+00", "2010-11-07 12:00+00"},
		rollup: "grain => 'hour', time_zone => 'America/St_Johns'", session: "UTC",
		query: "SELECT date_trunc('day', t, 'America/St_Johns') AS b, count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s GROUP BY 1 ORDER BY 1"},
	// 18:40 UTC on 1985-12-31 is 00:25 +05:45 on 1986-01-01, in the bucket
	// 18:15 UTC (23:45 +05:30 on the 31st): counted on the 31st.
	{name: "kathmandu_group_day", typ: "timestamptz",
		rows:   []string{"1985-12-31 18:40+00", "1985-12-31 12:00+00"},
		rollup: "grain => 'hour', time_zone => 'Asia/Kathmandu'", session: "UTC",
		query: "SELECT date_trunc('day', t, 'Asia/Kathmandu') AS b, count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s GROUP BY 1 ORDER BY 1"},
	// Days not monotone in time: 02:30:30 UTC on 2010-11-07 is in the day of
	// the 7th, read whole for a range from 02:45 UTC (3 rows for 2).
	{name: "stjohns_day_lower", typ: "timestamptz",
		rows:   []string{"2010-11-07 02:30:30+00", "2010-11-07 03:00+00", "2010-11-07 12:00+00"},
		rollup: "grain => 'day', time_zone => 'America/St_Johns'", session: "UTC",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t >= '2010-11-07 02:45+00'"}, // timestamptz bounds on timestamp and date columns: 02:30 is 07:30 UTC in
	// New York, but its bucket is neither in the rollup's range (from 03:00)
	// nor read as the edge (1 row for 2).
	{name: "ts_tstz_lower", typ: "timestamp",
		rows:   []string{"2025-03-09 02:30", "2025-03-09 03:30"},
		rollup: "grain => 'hour'", session: "America/New_York",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t >= timestamptz '2025-03-09 07:00+00'"},
	// 02:30 (07:30 UTC) counted with its bucket, 02:00, below 03:15 (2 rows
	// for 1).
	{name: "ts_tstz_upper", typ: "timestamp",
		rows:   []string{"2025-03-09 01:30", "2025-03-09 02:30"},
		rollup: "grain => 'hour'", session: "America/New_York",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t < timestamptz '2025-03-09 07:15+00'"},
	// 2011-12-30 and 2011-12-31 are both 2011-12-30 10:00 UTC in Apia; the
	// 30th is lost (1 row for 2).
	{name: "date_tstz_apia", typ: "date",
		rows:   []string{"2011-12-30", "2011-12-31"},
		rollup: "grain => 'day'", session: "Pacific/Apia",
		query: "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM %s WHERE t >= timestamptz '2011-12-31 00:00+14'"},
}

// TestTimeSplitRegressions: the wrong answers TestTimeSplitDifferential
// found, each in its smallest form.
func TestTimeSplitRegressions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	only := os.Getenv("PGSKETCH_SPLIT_ONLY")
	skip := func(c splitRegression) bool {
		return only != "" && !strings.Contains(","+only+",", ","+c.name+",")
	}
	for i, c := range splitRegressions {
		if skip(c) {
			continue
		}
		table := fmt.Sprintf("reg%d", i)
		var vals []string
		for j, r := range c.rows {
			vals = append(vals, fmt.Sprintf("('%s', %d, %d)", r, j, 1<<j))
		}
		mustExec(t, conn, fmt.Sprintf(`CREATE TABLE %[1]s (t %[2]s, u bigint, amount numeric(12,2));
			INSERT INTO %[1]s VALUES %[3]s;
			SELECT pgsketch.create_rollup('%[1]s_r', '%[1]s', 't', %[4]s, distinct_columns => '{u}', sum_columns => '{amount}')`,
			table, c.typ, strings.Join(vals, ", "), c.rollup))
		for _, l := range c.levels {
			mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.add_rollup_level('%s_r', '%s')`, table, l))
		}
		refreshRollup(t, conn, table+"_r", refresh.Options{})
	}
	p := startProxy(t, server.adminURL, "--approx", "on")
	for i, c := range splitRegressions {
		if skip(c) {
			continue
		}
		table := fmt.Sprintf("reg%d", i)
		opt := "&options=" + strings.NewReplacer(" ", "%20", "=", "%3D", "/", "%2F", "+", "%2B").Replace("-c TimeZone="+c.session)
		mode := pgx.QueryExecModeSimpleProtocol
		if len(c.params) > 0 {
			mode = pgx.QueryExecModeCacheStatement
		}
		proxied := connectMode(t, p.URL(db.DSN)+opt, mode)
		direct := connectMode(t, db.DSN+opt, mode)
		q := fmt.Sprintf(c.query, table)
		want, err := direct.query(ctx, q, c.params...)
		if err != nil {
			t.Fatalf("%s: %s: %v", c.name, q, err)
		}
		got, err := proxied.query(ctx, q, c.params...)
		if err != nil {
			t.Fatalf("%s: %s: %v", c.name, q, err)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "rollup "+table+"_r") {
			why := ""
			if ex, err := proxied.query(ctx, "EXPLAIN "+q, c.params...); err == nil && len(ex.rows) > 0 {
				why = fmt.Sprint(ex.rows[:min(4, len(ex.rows))])
			}
			t.Logf("%s: passed through: %q %s", c.name, got.notices, why)
		}
		if os.Getenv("PGSKETCH_SPLIT_EXPLAIN") != "" {
			ex, _ := proxied.query(ctx, "EXPLAIN "+q, c.params...)
			if ex != nil {
				for _, r := range ex.rows {
					t.Log(r)
				}
			}
			var s string
			conn.QueryRow(ctx, fmt.Sprintf(`SELECT string_agg(bucket || ' ' || row_count, ', ' ORDER BY bucket) FROM %s_r`, table)).Scan(&s)
			t.Log("rollup: ", s)
			for _, l := range c.levels {
				conn.QueryRow(ctx, fmt.Sprintf(`SELECT string_agg(bucket || ' ' || row_count, ', ' ORDER BY bucket) FROM %s_r_%s`, table, l)).Scan(&s)
				t.Log(l, ": ", s)
			}
		}
		errs, err := compareRollupAnswer(got, want)
		for _, e := range errs {
			if e > 5 {
				err = fmt.Errorf("distinct count %.1f standard errors off", e)
			}
		}
		if err != nil {
			t.Errorf("%s: session %s: %s: proxy %v, PostgreSQL %v: %v (%q)", c.name, c.session, q, got.rows, want.rows, err, got.notices)
		}
	}
}

// debugSplitQuery logs the proxy's EXPLAIN (VERBOSE) of q, the rows its
// fetch statement returns when run directly (with index scans off when
// PGSKETCH_SPLIT_NOINDEX is set), and the rollup's change log.
func debugSplitQuery(t *testing.T, conn *pgx.Conn, pc *noticeConn, rollup string, q splitQuery) {
	ctx := context.Background()
	ex, err := pc.query(ctx, "EXPLAIN (VERBOSE) "+q.sql, q.params...)
	if err != nil {
		t.Log(err)
		return
	}
	for _, r := range ex.rows {
		t.Log(r[0])
		f, ok := strings.CutPrefix(r[0], "fetch: ")
		if !ok {
			continue
		}
		mustExec(t, conn, "SET TimeZone = '"+q.sess+"'")
		if os.Getenv("PGSKETCH_SPLIT_NOINDEX") != "" {
			mustExec(t, conn, "SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off")
		}
		rows, err := conn.Query(ctx, f, q.params...)
		if err != nil {
			t.Log(err)
			continue
		}
		for rows.Next() {
			v, _ := rows.Values()
			t.Log("fetch row: ", v)
		}
		rows.Close()
		mustExec(t, conn, "RESET ALL")
	}
	var dirty string
	conn.QueryRow(ctx, `SELECT coalesce(string_agg(bucket::text, ', '), '') FROM pgsketch.rollup_dirty WHERE rollup = $1`, rollup).Scan(&dirty)
	t.Log("changed buckets: ", dirty)
}
