package exec

import (
	"container/list"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// Cache holds the rollup halves of fetches, decoded and merged per group,
// so that a repeated query reads only its base edges and tail from
// PostgreSQL. It is safe for concurrent use.
//
// An entry is keyed by the caller's scope (database, role, session
// settings), the fetch statement and the client's parameters it binds, and
// holds the rows of one token: the rollup's catalog version and the xmin
// of its pgsketch.rollup_defs row, the bucket range the statement selects,
// and the buckets of that range the change log pgsketch.rollup_dirty lists
// (the rollup half leaves them out; they are read from the base table),
// as the fetch statement itself computes them in the client's snapshot.
// The fetch then skips its rollup half exactly when the token it computes
// equals the cached entry's, so a cached answer is never stale: a refresh
// bumps the version and rewrites the row, whose new xmin is the refreshing
// transaction's (a refresh rolled back leaves a version number a later one
// reuses, never its xmin); a range moved by now() or a parameter changes
// the range; and the log, which a session sees with its own uncommitted
// entries and without other sessions', and whose entries a rollback takes
// back, is named by its buckets, not counted (two states with as many
// entries can list different buckets).
// The fetch still names the rollup and the base table, so PostgreSQL
// checks the role's privileges on both on every query.
type Cache struct {
	max int64

	mu   sync.Mutex
	used int64
	lru  *list.List // of *cacheEntry, most recent first
	m    map[string]*list.Element
	// hits and misses count lookups, for tests and logs.
	hits, misses int64
	// sqls are the cached fetch statements written (statement), counted
	// in sqlBytes.
	sqls     map[fetchKey]string
	sqlBytes int64
}

type cacheEntry struct {
	key, token string
	part       *rollupPart
	// inserts are the inserted rows read with part's token, or nil.
	inserts *insertsState
	// shaped is a shaping statement's answer (shapeKey); part is then nil.
	shaped *upstream.Result
	size   int64
}

// NewCache returns a cache bounded by maxBytes of decoded rows, or nil
// (no caching) if maxBytes <= 0.
func NewCache(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	return &Cache{max: maxBytes, lru: list.New(), m: map[string]*list.Element{}, sqls: map[fetchKey]string{}}
}

// Stats returns the number of cached answers used and of fetches that
// read the rollup half, and the bytes held.
func (c *Cache) Stats() (hits, misses, bytes int64) {
	if c == nil {
		return 0, 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, c.used
}

func (c *Cache) get(key string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*cacheEntry)
	}
	return nil
}

func (c *Cache) count(hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hit {
		c.hits++
	} else {
		c.misses++
	}
}

// sized sets e's size: what its rows hold and its key and token.
func (e *cacheEntry) sized() *cacheEntry {
	e.size = e.part.size + int64(len(e.key)+len(e.token)) + 128
	if e.inserts != nil {
		e.size += e.inserts.size
	}
	return e
}

// insertsState is the inserted rows (plan.Fetch.Inserts) a cached fetch
// read for an entry's token: the arm's rows, as fetched (grouped by the
// plan's keys), the snapshot they were read in, and the number of rows of
// the last read of them all. It is never modified once built.
type insertsState struct {
	snap string
	rows [][][]byte
	full int
	size int64
}

// maxDeltaRows bounds the rows an insertsState gathers from reads of
// the rows inserted since the last (each adds up to one per group): past
// twice a full read's and this many more, the entry keeps no snapshot,
// and the next fetch reads them all again, one row per group.
const maxDeltaRows = 256

// newInsertsState is the state after a fetch read rows in snapshot snap:
// all of them, or, when delta is set, those since the state of entry old.
// The rows are copied.
func newInsertsState(snap string, delta bool, old *cacheEntry, rows [][][]byte) *insertsState {
	s := &insertsState{snap: snap, full: len(rows)}
	if delta {
		s.full = old.inserts.full
		s.rows = make([][][]byte, 0, len(old.inserts.rows)+len(rows))
		s.rows = append(s.rows, old.inserts.rows...)
		s.size = old.inserts.size
	}
	for _, r := range rows {
		c := make([][]byte, len(r))
		for i, v := range r {
			if v != nil {
				c[i] = append(make([]byte, 0, len(v)), v...)
				s.size += int64(len(v))
			}
			s.size += 24
		}
		s.rows = append(s.rows, c)
	}
	if len(s.rows) > 2*s.full+maxDeltaRows {
		return nil
	}
	return s
}

// putEntry stores ce, replacing its key's entry, and evicts the least
// recently used entries beyond the bound.
func (c *Cache) putEntry(ce *cacheEntry) {
	if ce.size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[ce.key]; ok {
		c.used -= e.Value.(*cacheEntry).size
		c.lru.Remove(e)
		delete(c.m, ce.key)
	}
	c.m[ce.key] = c.lru.PushFront(ce)
	c.used += ce.size
	for c.used > c.max {
		e := c.lru.Back()
		old := e.Value.(*cacheEntry)
		c.lru.Remove(e)
		delete(c.m, old.key)
		c.used -= old.size
	}
}

// rollupPart is the rollup half of a fetch: one row per rollup group, its
// keys, its HLL aggregates merged, its other aggregates' values. It is
// never modified once built.
type rollupPart struct {
	rows []partRow
	size int64
}

type partRow struct {
	keys  [][]byte
	hll   []*sketch.HLL          // per agg; nil for other ops or no sketch
	theta []*sketch.CompactTheta // per MergeTheta agg: the union of the row's sketches; else nil
	freq  []*sketch.Freq         // per MergeFreq agg: the row's summaries merged; else nil
	vals  [][]byte               // per agg; the fetched value for other ops
	// est holds, per agg, the estimate of the row's sketch alone as a
	// group's merge would compute it, once computed: a cached row is
	// read by many queries, most of which add nothing to it.
	est []atomic.Pointer[float64]
}

// estimate is the estimate of a group whose agg j holds the row's sketch
// and nothing more: computed as a merge would (a new sketch of the
// aggregate's parameters, united with the row's), then kept.
func (pr *partRow) estimate(j int, a plan.Agg) (float64, error) {
	if e := pr.est[j].Load(); e != nil {
		return *e, nil
	}
	h := pr.hll[j]
	if h.Log2m() != a.Log2m || h.Regwidth() != a.Regwidth {
		// Folded to a coarser row's precision: as the merge would unite it.
		var err error
		if h, err = unitedCopy(a, h); err != nil {
			return 0, err
		}
	}
	// Else a new sketch of a's parameters united with h is a copy of h
	// (MergeSketches made h from one, so its cutoff and sparse flag are
	// a's too), and Estimate reads h without changing it.
	e := h.Estimate()
	pr.est[j].Store(&e)
	return e, nil
}

// buildPart decodes and merges the rollup rows of a fetch. The result
// holds copies of the bytes it keeps, not slices of the fetch's.
func buildPart(p *plan.Rollup, rows [][][]byte) (*rollupPart, error) {
	nkeys := len(p.Keys)
	part := &rollupPart{rows: make([]partRow, 0, len(rows))}
	clone := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		part.size += int64(len(b)) + 24
		return append(make([]byte, 0, len(b)), b...)
	}
	for _, r := range rows {
		pr := partRow{keys: make([][]byte, nkeys), hll: make([]*sketch.HLL, len(p.Aggs)), vals: make([][]byte, len(p.Aggs)),
			est: make([]atomic.Pointer[float64], len(p.Aggs))}
		part.size += 64 + int64(nkeys+2*len(p.Aggs))*24
		for i := range nkeys {
			pr.keys[i] = clone(r[1+i])
		}
		for j, a := range p.Aggs {
			switch a.Op {
			case plan.MergeHLL:
				h, err := MergeSketches(r[a.RollupColumn], a)
				if err != nil {
					return nil, err
				}
				if pr.hll[j] = h; h != nil {
					part.size += hllSize(h)
				}
			case plan.MergeTheta:
				if err := keepMerged(&pr.theta, j, p, r, &part.size, mergeThetas, thetaSize); err != nil {
					return nil, err
				}
			case plan.MergeFreq:
				if err := keepMerged(&pr.freq, j, p, r, &part.size, mergeFreqs, freqSize); err != nil {
					return nil, err
				}
			case plan.Exact:
			default:
				pr.vals[j] = clone(r[a.RollupColumn])
			}
		}
		part.rows = append(part.rows, pr)
	}
	return part, nil
}

// MergeSketches merges the sketches of a fetch's rollup-half column for
// agg a: a bytea[] in binary format, of one sketch per rollup row (proxy
// merge) or of the group's one sketch PostgreSQL merged (server merge).
// NULL elements are skipped; nil is returned when there is no sketch.
func MergeSketches(arr []byte, a plan.Agg) (*sketch.HLL, error) {
	elems, err := decodeBinaryArray(arr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	var merged *sketch.HLL
	var s sketch.HLL
	for _, e := range elems {
		if e == nil {
			continue
		}
		if merged == nil {
			if merged, err = sketch.NewHLL(a.Log2m, a.Regwidth); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
			}
		}
		if merged.UnionFull(e) {
			continue // a FULL sketch of merged's parameters, merged from its packed registers
		}
		if err := s.UnmarshalBinary(e); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
		}
		if err := unionFolding(&merged, &s); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
		}
	}
	return merged, nil
}

// thetaSize and freqSize approximate the memory a Theta sketch and a
// frequent-items summary hold.
func thetaSize(u *sketch.CompactTheta) int64 { return int64(u.NumRetained())*8 + 64 }

func freqSize(f *sketch.Freq) int64 { return int64(len(f.Items()))*48 + 64 }

// keepMerged merges the sketches of agg j of fetched row r and, when there
// are any, keeps the result at (*kept)[j], the slice made on first use,
// adding its size to *size.
func keepMerged[T any](kept *[]*T, j int, p *plan.Rollup, r [][]byte, size *int64,
	merge func([]byte, plan.Agg) (*T, error), sizeOf func(*T) int64) error {
	a := p.Aggs[j]
	v, err := merge(r[a.RollupColumn], a)
	if err != nil || v == nil {
		return err
	}
	if *kept == nil {
		*kept = make([]*T, len(p.Aggs))
	}
	(*kept)[j] = v
	*size += sizeOf(v)
	return nil
}

// hllSize approximates the memory an HLL holds: one byte per register,
// or 8 bytes per explicit value.
func hllSize(h *sketch.HLL) int64 {
	if h.Exact() {
		if b, err := h.MarshalBinary(); err == nil {
			return int64(len(b)) + 160
		}
	}
	return int64(1)<<uint(h.Log2m()) + 160
}

// tokenPrefix starts the part column of the fetch's token row.
const tokenPrefix = "pgsketch_token:"

// cachedFetch returns the plan's fetch statement (with the server's merge
// when server is set) for the cache: its rollup arm runs only when the
// token (rollup version, rollup_defs row, bucket range and the buckets of
// the range the change log lists, as the statement computes them) is
// distinct from the text parameter $tokenParam, and a last row carries the
// token in the part column. The set of logged buckets names the rollup
// rows the arm leaves out where a count of log entries would not: entries
// a transaction rolled back, or another session's not yet committed, can
// leave as many behind for other buckets. st is the fetch as bound, for the client's
// parameters. ok is false when the rollup arm could select or compute
// differently from one query to the next with the same statement,
// parameters and settings in a way the token does not cover.
//
// A plan that reads inserted rows (plan.Fetch.Inserts) reads them as
// insertedArms says, with the snapshot of an earlier read as the text
// parameter $tokenParam+1.
func cachedFetch(c *Cache, p *plan.Rollup, server bool, st upstream.Statement, ncols, tokenParam int) (string, bool) {
	f := p.Fetch
	if len(f.Cols) == 0 || len(f.Range) == 0 || (server && f.ServerCols == nil) {
		return "", false
	}
	// The token covers the bucket range (Range, and From, which holds only
	// the tables and that range); what else the rollup arm holds comes
	// from the query: its group keys and filters, which the rewriter
	// judged, and the parameters they read, whose values only now are
	// known.
	if p.Cache.Why != "" {
		return "", false
	}
	for _, n := range p.Cache.Params {
		if n >= 1 && n <= len(st.Params) && plan.NamesRelativeTime(string(st.Params[n-1])) {
			return "", false
		}
	}
	return c.statement(fetchKey{p, server}, func() string { return cachedFetchSQL(p, server, ncols, tokenParam) }), true
}

// cachedFetchSQL writes cachedFetch's statement; ncols and tokenParam are
// functions of p.
func cachedFetchSQL(p *plan.Rollup, server bool, ncols, tokenParam int) string {
	f := p.Fetch
	epoch := func(x string) string { return "extract(epoch FROM " + x + ")" }
	token := "concat((SELECT d.version || '/' || d.xmin FROM pgsketch.rollup_defs AS d WHERE d.name = " +
		catalog.QuoteLiteral(p.Rollup) + "), '|', "
	if len(p.Time.Lower) > 0 {
		token += epoch(p.Time.BucketsFrom)
	} else {
		token += "''"
	}
	token += ", '|', " + epoch(p.Time.BucketsTo) + ", '|', " + p.Time.Logged + ")"
	tokenArg := "CAST($" + strconv.Itoa(tokenParam) + " AS text)"
	cond := "(" + token + ") IS DISTINCT FROM " + tokenArg
	tokenRow := plan.Select{Cols: append([]string{"'" + tokenPrefix + "' || " + token}, slices.Repeat([]string{"NULL"}, ncols-1)...)}
	if f.Inserts == nil {
		return f.SQL(server, cond, tokenRow)
	}
	seen, arms := insertedArms(*f.Inserts, token, tokenArg, "$"+strconv.Itoa(tokenParam+1), ncols)
	f.Inserts = nil
	f.With = append(slices.Clone(f.With), seen)
	return f.SQL(server, cond, append(arms, tokenRow)...)
}

// fetchKey names a cached fetch statement: a plan's, with the server's
// merge or not.
type fetchKey struct {
	p      *plan.Rollup
	server bool
}

// maxStatements and maxStatementBytes bound the cached fetch statements
// the cache keeps written; past either they are all dropped (and the plans
// they name let go). An entry is counted at four times its statement's
// length: the plan it keeps alive holds its fetch, server-merge and
// shaping statements too. A statement longer than maxStatementSQL is
// written every time and not kept: a plan that large most likely comes
// from a client's statement too long for the proxy's plan cache (planned
// anew each time, so its entry would never be used again), and keeping
// it would only push the others out.
const (
	maxStatements     = 1024
	maxStatementBytes = 16 << 20
	maxStatementSQL   = 64 << 10
)

// statement returns the cached fetch statement of k, written by build the
// first time: a plan is immutable, and writing its statement (several KB)
// cost more than the rest of a warm answer in the proxy.
func (c *Cache) statement(k fetchKey, build func() string) string {
	c.mu.Lock()
	sql, ok := c.sqls[k]
	c.mu.Unlock()
	if ok {
		return sql
	}
	sql = build()
	if len(sql) > maxStatementSQL {
		return sql
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sqls[k]; ok {
		return sql
	}
	if len(c.sqls) >= maxStatements || c.sqlBytes+4*int64(len(sql)) > maxStatementBytes {
		clear(c.sqls)
		c.sqlBytes = 0
	}
	c.sqls[k] = sql
	c.sqlBytes += 4 * int64(len(sql))
	return sql
}

// seenRelation is the cached fetch's one-row relation saying how it reads
// the inserted rows (see insertedArms).
const seenRelation = "pgsketch_seen"

// insertsPrefix starts the part column of the cached fetch's row saying
// how it read the inserted rows: "delta:" or "full:", then the snapshot
// the statement read in, empty when its transaction has a transaction ID
// (it may have written rows other sessions do not see).
const insertsPrefix = "pgsketch_inserts:"

// insertedArms are the cached fetch's arms reading the inserted rows in
// place of arm (the plan's), given the token's SQL, the bound token and
// the parameter snap, the text of the snapshot an earlier read of them was
// made in (NULL for none). They read the rows inserted since that read,
// when the cache's entry holds its rows (a delta), and all of them
// otherwise, and a row says which and the statement's snapshot.
//
// A delta reads the rows whose transaction snap does not see. It is exact
// when the earlier read saw what snap sees and no more (its statement
// had no transaction ID: no rows of its own; and ran on a primary, whose
// snapshots list the transactions running), and this statement sees
// all of that: the same token (no refresh since, which alone deletes
// inserted rows, and the same buckets read), no rows of its own either,
// and every transaction snap sees committed in this statement's snapshot
// (a repeatable-read transaction's may be older): none below snap's xmax
// still running here that snap sees, and snap's xmax not past this one's.
// Rows snap does not see were inserted by transactions at or after its
// xmin.
func insertedArms(arm plan.Select, token, tokenArg, snapParam string, ncols int) (plan.CTE, []plan.Select) {
	snap := "CAST(" + snapParam + " AS pg_catalog.pg_snapshot)"
	now := "pg_catalog.pg_current_snapshot()"
	// A hot standby's snapshot lists its running transactions only as
	// subtransactions, which pg_current_snapshot() leaves out: there every
	// read is whole, and none is kept.
	noXID := "pg_catalog.pg_current_xact_id_if_assigned() IS NULL AND NOT pg_catalog.pg_is_in_recovery()"
	delta := "coalesce(" + snap + " IS NOT NULL AND (" + token + ") IS NOT DISTINCT FROM " + tokenArg + " AND " + noXID +
		" AND pg_catalog.pg_snapshot_xmax(" + snap + ") <= pg_catalog.pg_snapshot_xmax(" + now + ")" +
		" AND NOT EXISTS (SELECT FROM pg_catalog.pg_snapshot_xip(" + now + ") AS x(xid) WHERE x.xid < pg_catalog.pg_snapshot_xmax(" + snap +
		") AND pg_catalog.pg_visible_in_snapshot(x.xid, " + snap + ")), false)"
	seen := plan.CTE{Name: seenRelation, SQL: "SELECT " + delta + " AS delta, CASE WHEN " + noXID + " THEN " + now + " END AS snap"}
	isDelta := "(SELECT delta FROM " + seenRelation + ")"
	all, since := arm, arm
	all.Where = append(slices.Clone(arm.Where), "NOT "+isDelta)
	since.Where = append(slices.Clone(arm.Where), isDelta,
		"t.pgsketch_xid >= pg_catalog.pg_snapshot_xmin("+snap+")", "NOT pg_catalog.pg_visible_in_snapshot(t.pgsketch_xid, "+snap+")")
	info := plan.Select{Cols: append([]string{"'" + insertsPrefix + "' || CASE WHEN delta THEN 'delta:' ELSE 'full:' END || coalesce(CAST(snap AS text), '')"},
		slices.Repeat([]string{"NULL"}, ncols-1)...), From: seenRelation}
	return seen, []plan.Select{all, since, info}
}

// cacheKey identifies the rollup half a fetch statement selects, but for
// the token: the caller's scope, the statement, the merge parameters, and
// the client's parameter values it binds.
func cacheKey(scope string, p *plan.Rollup, st upstream.Statement) string {
	var b []byte
	add := func(s []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	add([]byte(scope))
	add([]byte(p.FetchSQL))
	for _, a := range p.Aggs {
		add([]byte(string(a.Op) + "/" + a.Measure + "/" + strconv.Itoa(a.Log2m) + "/" + strconv.Itoa(a.Regwidth) + "/" + a.Hash))
	}
	for i := range st.Params {
		oid := uint32(0)
		if i < len(st.ParamOIDs) {
			oid = st.ParamOIDs[i]
		}
		f := int16(0)
		switch len(st.ParamFormats) {
		case 0:
		case 1:
			f = st.ParamFormats[0]
		default:
			if i < len(st.ParamFormats) {
				f = st.ParamFormats[i]
			}
		}
		b = binary.BigEndian.AppendUint32(b, oid)
		b = binary.BigEndian.AppendUint16(b, uint16(f))
		if st.Params[i] == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		add(st.Params[i])
	}
	return string(b)
}

// shapeKey is the cache key of a shaping statement's answer, which depends
// on nothing but the statement as bound (the merged groups and the
// client's parameters), its result formats and the caller's scope (the
// settings it prints under); keep is false when the plan may not keep it
// (plan.Groups.ShapeCache) or a parameter it reads names a relative time.
// The fetch before it still ran: the privileges, the capture check and
// the table guard were checked for this query.
func shapeKey(x *run, g *plan.Groups, st upstream.Statement) (key string, keep bool) {
	if x.cache == nil || g.ShapeCache == nil || g.ShapeCache.Why != "" {
		return "", false
	}
	for _, n := range g.ShapeCache.Params {
		if n >= 1 && n <= len(x.params.Values) && plan.NamesRelativeTime(string(x.params.Values[n-1])) {
			return "", false
		}
	}
	var b []byte
	add := func(s []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	add([]byte("shape"))
	add([]byte(x.scope))
	add([]byte(st.SQL))
	for i, v := range st.Params {
		if v == nil {
			b = binary.BigEndian.AppendUint32(b, ^uint32(0))
		} else {
			add(v)
		}
		b = binary.BigEndian.AppendUint32(b, st.ParamOIDs[i])
	}
	for _, f := range st.ParamFormats {
		b = binary.BigEndian.AppendUint16(b, uint16(f))
	}
	b = append(b, '|')
	for _, f := range st.ResultFormats {
		b = binary.BigEndian.AppendUint16(b, uint16(f))
	}
	return string(b), true
}

// getShaped returns the shaping statement's answer kept under key, or nil:
// a copy whose rows' values are the kept ones, which no one modifies.
func (c *Cache) getShaped(key string) *upstream.Result {
	e := c.get(key)
	if e == nil || e.shaped == nil {
		return nil
	}
	return &upstream.Result{Fields: slices.Clone(e.shaped.Fields), Rows: slices.Clone(e.shaped.Rows), Tag: e.shaped.Tag}
}

// putShaped keeps a shaping statement's answer under key. The answer is
// never modified once kept: callers only read it.
func (c *Cache) putShaped(key string, res *upstream.Result) {
	size := int64(len(key)) + 128 + int64(len(res.Tag))
	for _, f := range res.Fields {
		size += int64(len(f.Name)) + 32
	}
	for _, r := range res.Rows {
		size += 24
		for _, v := range r {
			size += int64(len(v)) + 24
		}
	}
	c.putEntry(&cacheEntry{key: key, shaped: res, size: size})
}
