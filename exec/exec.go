package exec

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// Params are the client's parameter values for a plan's $1..$n.
type Params struct {
	OIDs    []uint32
	Values  [][]byte
	Formats []int16
}

// Answer is an executed plan's result.
type Answer struct {
	// Result is the shaped answer in the formats asked for.
	upstream.Result
	// BaseRows reports whether any rows of the base table (edges, tail,
	// NULL times, changed buckets) were merged in.
	BaseRows bool
	// InsertedRows reports whether any rows inserted since the last
	// refresh (plan.Rollup.Inserts) were merged in.
	InsertedRows bool
	// ChangedBuckets is the number of buckets of the range that the change
	// log listed, read from the base table instead of the rollup.
	ChangedBuckets int64
	// Groups is the number of merged groups.
	Groups int
	// CachedRollup reports whether the rollup half came from the Cache
	// rather than from PostgreSQL.
	CachedRollup bool
	// CachedInserts reports whether rows inserted since the rollup's last
	// refresh came from the Cache (only those inserted since its read of
	// them were read).
	CachedInserts bool
	// Merge is where the rollup half's sketches were merged: the plan's
	// strategy, unless CachedRollup.
	Merge plan.Merge
	// Samples pair, per group, an exact distinct count the query also
	// computed (COUNT(DISTINCT x) beside APPROX_COUNT_DISTINCT(x)) with the
	// estimate, for the status page's error chart.
	Samples []Sample
	// Summary, when set, says what the answer was made of, for its notice
	// (an overlap's estimate, a grid's cells, a top-k's proof); else the
	// plan's Notice does.
	Summary string
	// Explained is the line EXPLAIN shows for a plan it runs
	// (plan.Facts.ExplainRuns).
	Explained string
	// Complete, when set, is the whole notice: the answer read no rollup
	// rows (a first-seen count), so none of what Notice adds about them
	// applies.
	Complete string
}

// Sample is one group's exact distinct count and its estimate.
type Sample struct {
	Exact, Estimate float64
	// StdErr is the sketch's relative standard error.
	StdErr float64
}

// Notice is the text of the NoticeResponse sent with the answer of a plan
// whose head is p.
func (a *Answer) Notice(p *plan.Head) string {
	if a.Complete != "" {
		return a.Complete
	}
	n := cmp.Or(a.Summary, p.Notice)
	if n == "" {
		n = "pgsketch: answered from rollup " + p.Rollup
	}
	if a.ChangedBuckets > 0 {
		n += fmt.Sprintf("; %d changed bucket(s) since the last refresh read from the base table", a.ChangedBuckets)
	}
	if a.BaseRows {
		n += "; edge and tail rows read from the base table " + p.Source.String()
	} else {
		n += "; no rows read from the base table"
	}
	if a.InsertedRows {
		n += "; rows inserted since the last refresh added"
	}
	switch {
	case a.CachedRollup && a.CachedInserts:
		return n + "; rollup rows from the proxy's cache, and the inserted rows of earlier reads"
	case a.CachedRollup:
		return n + "; rollup rows from the proxy's cache"
	case a.Merge == plan.MergeServer:
		return n + "; rollup rows merged in PostgreSQL (hll_union_agg)"
	}
	return n + "; rollup rows merged in the proxy"
}

// ErrData is wrapped around errors in the bytes a fetch returned (a
// sketch that does not decode, sketches that cannot be merged): the plan
// cannot be answered from the rollup.
var ErrData = errors.New("exec: rollup data")

// ErrNotSource is returned when a fetch found that the statement's
// unqualified table name is not the rollup's source on the session's
// search_path (plan.Head.Guard): nothing of the answer is used, and the
// statement is PostgreSQL's to answer.
var ErrNotSource = errors.New("exec: the table is not the rollup's source on this search_path")

// ErrNoServerMerge is returned for a plan whose Merge is MergeServer in a
// database without the hll extension: nothing was run. (The handler
// refuses such a plan before it runs.)
var ErrNoServerMerge = fmt.Errorf("%w: pgsketch.merge is server, but the database has no hll extension", ErrData)

// Run executes a plan without a cache; its rows come back in
// resultFormats.
func Run(ctx context.Context, q upstream.Session, p plan.Plan, params Params, resultFormats []int16) (*Answer, error) {
	return RunCached(ctx, q, p, params, resultFormats, nil, "")
}

// run is what executing one plan needs besides the plan: the session to
// query, the client's parameters and result formats, and the cache of
// rollup rows with its scope.
type run struct {
	q       reparsing
	params  Params
	formats []int16
	cache   *Cache
	scope   string
}

// RunCached is Run with the rollup half of the fetch kept in cache (nil:
// none) under scope, which must identify everything beyond the plan and
// the parameters that decides the rows the fetch's rollup half returns:
// the database, the role, the session's settings.
func RunCached(ctx context.Context, q upstream.Session, p plan.Plan, params Params, resultFormats []int16, cache *Cache, scope string) (*Answer, error) {
	h := p.Header()
	x := &run{q: reparsing{q, h.Reparse, h.OwnSnapshot, h.Session.TimeZone}, params: params, formats: resultFormats, cache: cache, scope: scope}
	switch p := p.(type) {
	case *plan.Rollup:
		return x.rollup(ctx, p)
	case *plan.Overlap:
		return x.overlap(ctx, p)
	case *plan.Retention:
		return x.retention(ctx, p)
	case *plan.TopK:
		return x.topK(ctx, p)
	case *plan.Nested:
		return x.nested(ctx, p)
	case *plan.FirstSeen:
		return x.firstSeen(ctx, p)
	}
	return nil, fmt.Errorf("exec: a %T plan is not run by the executor", p)
}

// reparsing is a session whose statements are marked as the plan's head
// says: Reparse and OwnSnapshot, with the session's time zone.
type reparsing struct {
	upstream.Session
	reparse, ownSnapshot bool
	zone                 string
}

// Query implements upstream.Session.
func (r reparsing) Query(ctx context.Context, st upstream.Statement) (*upstream.Result, error) {
	r.mark(&st)
	return r.Session.Query(ctx, st)
}

// mark marks st as the plan's head says.
func (r reparsing) mark(st *upstream.Statement) {
	st.Reparse, st.OwnSnapshot = r.reparse, r.ownSnapshot
	if r.ownSnapshot {
		st.Zone = r.zone
	}
}

// QueryPair implements upstream.Session, marking first as Query marks a
// statement; the second runs in first's transaction.
func (r reparsing) QueryPair(ctx context.Context, first upstream.Statement, next upstream.Next) (*upstream.Result, *upstream.Result, error) {
	r.mark(&first)
	return r.Session.QueryPair(ctx, first, func(res *upstream.Result) (*upstream.Statement, error) {
		st, err := next(res)
		if st != nil {
			st.Reparse = r.reparse
		}
		return st, err
	})
}

// rollup answers a Rollup plan: its groups, shaped.
func (x *run) rollup(ctx context.Context, p *plan.Rollup) (*Answer, error) {
	m, ans, err := x.groups(ctx, p)
	if err != nil {
		return nil, err
	}
	res, err := m.shape(ctx, x, &p.Groups, p.Params)
	if err != nil {
		return nil, err
	}
	ans.Result = *res
	return ans, nil
}

// runGroups runs a FromRollup plan up to its shaping statement: the fetch,
// the exact statement if any, and the merge; the Answer says what they
// read.
func (x *run) groups(ctx context.Context, p *plan.Rollup) (*merged, *Answer, error) {
	f, err := x.fetch(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	part, err := f.rollupPart(p)
	if err != nil {
		return nil, nil, err
	}
	exact, err := x.exact(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	m, err := merge(p, part, f.res, exact)
	if err != nil {
		return nil, nil, err
	}
	return m, &Answer{BaseRows: m.baseRows, InsertedRows: m.insertedRows, Groups: m.groups, Samples: m.samples, CachedRollup: f.fromCache,
		CachedInserts: f.cachedInserts(), Merge: f.strategy, ChangedBuckets: f.changed}, nil
}

// Bind is a plan's statement sql (which references the parameters refs
// of the plan's n, and the lifted literals after them) with the client's
// parameters bound, as Run binds them.
func Bind(sql string, n int, refs []int, params Params, lifted ...string) upstream.Statement {
	st := statement(sql, n, refs, params, nil)
	bindLifted(&st, lifted)
	return st
}

// bindLifted binds to st the literals a plan's fetch takes as parameters
// after the client's (plan.Rollup.Lifted): text, of the type PostgreSQL infers.
func bindLifted(st *upstream.Statement, lifted []string) {
	for _, v := range lifted {
		st.ParamOIDs = append(st.ParamOIDs, 0)
		st.Params = append(st.Params, []byte(v))
		if len(st.ParamFormats) > 0 {
			st.ParamFormats = append(st.ParamFormats, 0)
		}
	}
}

// statement binds the client's parameters for one of the plan's
// statements: those it references with their own types, the others as
// NULL text (PostgreSQL must still know every $n's type up to the highest).
func statement(sql string, n int, refs []int, params Params, resultFormats []int16) upstream.Statement {
	st := upstream.Statement{SQL: sql, ResultFormats: resultFormats}
	if n == 0 {
		return st
	}
	used := make(map[int]bool, len(refs))
	for _, r := range refs {
		used[r] = true
	}
	st.ParamOIDs = make([]uint32, n)
	st.Params = make([][]byte, n)
	st.ParamFormats = make([]int16, n)
	for i := 0; i < n; i++ {
		if !used[i+1] {
			st.ParamOIDs[i] = pgtype.TextOID
			continue
		}
		if i < len(params.OIDs) {
			st.ParamOIDs[i] = params.OIDs[i]
		}
		if i < len(params.Values) {
			st.Params[i] = params.Values[i]
		}
		switch len(params.Formats) {
		case 0:
		case 1:
			st.ParamFormats[i] = params.Formats[0]
		default:
			if i < len(params.Formats) {
				st.ParamFormats[i] = params.Formats[i]
			}
		}
	}
	return st
}

// merged is the input of the shaping statement: one column per key and
// per aggregate, one element per row.
type merged struct {
	samples  []Sample
	elemOIDs []uint32
	cols     [][][]byte
	baseRows bool
	// insertedRows: rows of the rollup's inserted rows were merged in.
	insertedRows bool
	groups       int
}

func (m *merged) addRow(vals [][]byte) {
	for i, v := range vals {
		m.cols[i] = append(m.cols[i], v)
	}
}

type group struct {
	keys     [][]byte
	sketches []*sketch.HLL // per agg; nil for other ops
	// only is, per agg, the one rollup-half row whose sketch is all the
	// group has so far: it is not copied into sketches unless more comes,
	// and its estimate is the row's own, computed once per cached row.
	only   []*partRow
	thetas []thetaMerge   // per agg; used by MergeTheta aggs
	freqs  []*sketch.Freq // per agg; used by MergeFreq aggs
}

// groupKey encodes key values of types oids so that keys PostgreSQL
// holds equal (NULLs equal) give equal strings (sameKey).
func groupKey(dst []byte, oids []uint32, keys [][]byte) []byte {
	for i, k := range keys {
		if k == nil {
			dst = append(dst, 0)
			continue
		}
		if i < len(oids) {
			k = sameKey(oids[i], k)
		}
		dst = append(dst, 1)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(k)))
		dst = append(dst, k...)
	}
	return dst
}

// newSketch gives group g an empty sketch j of agg a if it has none.
func (g *group) newSketch(j int, a plan.Agg) error {
	if g.sketches[j] != nil {
		return nil
	}
	h, err := sketch.NewHLL(a.Log2m, a.Regwidth)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	g.sketches[j] = h
	return nil
}

// materialize makes agg j's sketch of the group hold what only held.
func (g *group) materialize(j int, a plan.Agg) error {
	pr := g.only[j]
	if pr == nil {
		return nil
	}
	g.only[j] = nil
	h, err := unitedCopy(a, pr.hll[j])
	g.sketches[j] = h
	return err
}

// unitedCopy is a new sketch of a's parameters united with s: what a
// group's sketch is after its first row's. s is not modified.
func unitedCopy(a plan.Agg, s *sketch.HLL) (*sketch.HLL, error) {
	h, err := sketch.NewHLL(a.Log2m, a.Regwidth)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	if err := unionFolding(&h, s); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	return h, nil
}

// unionFolding unions s into *dst, folding the finer of the two to the
// coarser precision when they differ. s is not modified.
func unionFolding(dst **sketch.HLL, s *sketch.HLL) error {
	h := *dst
	switch {
	case s.Log2m() < h.Log2m():
		f, err := h.Fold(s.Log2m())
		if err != nil {
			return err
		}
		*dst = f
		return f.Union(s)
	case s.Log2m() > h.Log2m():
		f, err := s.Fold(h.Log2m())
		if err != nil {
			return err
		}
		return h.Union(f)
	}
	return h.Union(s)
}

// shape runs the shaping statement of groups g, of a plan whose highest
// parameter is $n, over the merged groups.
func (m *merged) shape(ctx context.Context, x *run, g *plan.Groups, n int) (*upstream.Result, error) {
	if res, ok := m.project(g, x.formats); ok {
		return res, nil
	}
	st, err := m.shapeStatement(ctx, x, g, n)
	if err != nil {
		return nil, err
	}
	key, keep := shapeKey(x, g, st)
	if keep {
		if res := x.cache.getShaped(key); res != nil {
			return res, nil
		}
	}
	res, err := x.q.Query(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("exec: shape: %w", err)
	}
	if keep {
		x.cache.putShaped(key, res)
	}
	return res, nil
}

// shapeStatement builds the shaping statement over the merged groups.
func (m *merged) shapeStatement(ctx context.Context, x *run, g *plan.Groups, n int) (upstream.Statement, error) {
	st := statement("", n, g.ShapeParams, x.params, x.formats)
	if len(st.ParamFormats) == 0 && len(m.elemOIDs) > 0 {
		st.ParamFormats = make([]int16, n)
	}
	sql, err := m.groupsSQL(ctx, x.q, g, &st)
	if err != nil {
		return upstream.Statement{}, err
	}
	st.SQL = sql
	return st, nil
}

// groupsSQL is the shaping statement over the merged groups: the groups
// as GroupsRelation, then p.ShapeSQL. It binds the groups' columns as
// parameters appended to st's.
func (m *merged) groupsSQL(ctx context.Context, q upstream.Session, p *plan.Groups, st *upstream.Statement) (string, error) {
	nkeys := len(p.Keys)
	var names, cols, sel, args []string
	for i, k := range p.Keys {
		names = append(names, catalog.QuoteIdent(k.Name))
		c := "u.c" + strconv.Itoa(i+1)
		if k.Type != "" {
			c = "CAST(" + c + " AS " + k.Type + ")"
		}
		sel = append(sel, c)
	}
	for j, a := range p.Aggs {
		names = append(names, catalog.QuoteIdent(a.Name))
		c := "u.c" + strconv.Itoa(nkeys+j+1)
		switch a.Op {
		case plan.MergeHLL, plan.MergeTheta, plan.Exact:
			if a.Sketch {
				// The one row of the group that carries it (bytea has no max).
				sel = append(sel, "(array_agg("+c+") FILTER (WHERE "+c+" IS NOT NULL))[1]")
				continue
			}
			sel = append(sel, "max("+c+")")
		case plan.AddCounts:
			sel = append(sel, "CAST(COALESCE(sum("+c+"), 0) AS bigint)")
		case plan.AddSums:
			sel = append(sel, "CAST(sum("+c+") AS "+a.Type+")")
		case plan.TakeMin:
			sel = append(sel, "min("+c+")")
		case plan.TakeMax:
			sel = append(sel, "max("+c+")")
		default:
			return "", fmt.Errorf("exec: unknown merge op %q", a.Op)
		}
	}
	for i, elem := range m.elemOIDs {
		arr, err := arrayOID(ctx, q, elem)
		if err != nil {
			return "", err
		}
		cols = append(cols, "c"+strconv.Itoa(i+1))
		args = append(args, "$"+strconv.Itoa(len(st.Params)+1))
		st.ParamOIDs = append(st.ParamOIDs, arr)
		st.Params = append(st.Params, appendBinaryArray(nil, elem, m.cols[i]))
		st.ParamFormats = append(st.ParamFormats, 1)
	}
	var b strings.Builder
	b.WriteString("WITH " + plan.GroupsRelation + "(" + strings.Join(names, ", ") + ") AS (SELECT ")
	b.WriteString(strings.Join(sel, ", "))
	b.WriteString(" FROM unnest(" + strings.Join(args, ", ") + ") AS u(" + strings.Join(cols, ", ") + ")")
	if nkeys > 0 {
		pos := make([]string, nkeys)
		for i := range pos {
			pos[i] = strconv.Itoa(i + 1)
		}
		b.WriteString(" GROUP BY " + strings.Join(pos, ", "))
	}
	b.WriteString(") ")
	b.WriteString(p.ShapeSQL)
	return b.String(), nil
}

var (
	typeMap = pgtype.NewMap()
	// arrays caches array type OIDs of built-in element types (their OIDs
	// are the same in every database).
	arrays sync.Map // uint32 → uint32
)

// firstNormalObjectID is PostgreSQL's FirstNormalObjectId: OIDs below it
// are built in and the same in every database.
const firstNormalObjectID = 16384

// arrayOID returns the OID of the array type whose elements are elem.
func arrayOID(ctx context.Context, q upstream.Session, elem uint32) (uint32, error) {
	if v, ok := arrays.Load(elem); ok {
		return v.(uint32), nil
	}
	if t, ok := typeMap.TypeForOID(elem); ok {
		if at, ok := typeMap.TypeForName("_" + t.Name); ok {
			arrays.Store(elem, at.OID)
			return at.OID, nil
		}
	}
	res, err := q.Query(ctx, upstream.Statement{
		SQL:       "SELECT typarray FROM pg_catalog.pg_type WHERE oid = $1",
		ParamOIDs: []uint32{pgtype.OIDOID}, Params: [][]byte{strconv.AppendUint(nil, uint64(elem), 10)},
	})
	if err != nil {
		return 0, fmt.Errorf("exec: array type of %d: %w", elem, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 || res.Rows[0][0] == nil {
		return 0, fmt.Errorf("%w: type %d has no array type", ErrData, elem)
	}
	arr, err := strconv.ParseUint(string(res.Rows[0][0]), 10, 32)
	if err != nil || arr == 0 {
		return 0, fmt.Errorf("%w: type %d has no array type", ErrData, elem)
	}
	if elem < firstNormalObjectID {
		arrays.Store(elem, uint32(arr))
	}
	return uint32(arr), nil
}
