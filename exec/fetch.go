package exec

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/upstream"
)

// fetched is what the fetch statement returned, sorted by kind of row.
type fetched struct {
	// res holds the base rows (edges, tail, changed buckets): every row
	// but the rollup half's, the info row and the cache token.
	res        *upstream.Result
	rollupRows [][][]byte
	// changed is the info row's count of changed buckets read raw.
	changed  int64
	strategy plan.Merge
	// The cache of rollup halves, when the statement asked it (else
	// cache is nil): the entry held under key and the token the
	// statement returned, and whether the rollup half came from it.
	cache     *Cache
	key       string
	ent       *cacheEntry
	token     string
	fromCache bool
	// The inserted rows the statement read (also among res's rows), how
	// (insertsDelta: only those since the snapshot of the cache entry's),
	// and its snapshot when it had no transaction ID (insertsSnap), for
	// the cache.
	inserted     [][][]byte
	insertsInfo  bool
	insertsDelta bool
	insertsSnap  string
}

// runFetch runs the fetch statement of the plan's merge strategy, with
// the cache's token when the cache may serve its rollup half.
func (x *run) fetch(ctx context.Context, p *plan.Rollup) (*fetched, error) {
	for _, n := range p.FetchParams {
		if n > p.Params {
			// The statement would read the x.cache's token, or nothing, as $n.
			return nil, fmt.Errorf("exec: the fetch statement uses $%d of a plan of %d parameters", n, p.Params)
		}
	}
	nkeys := len(p.Keys)
	ncols := 1 + nkeys
	for _, a := range p.Aggs {
		ncols = max(ncols, a.RollupColumn+1, a.BaseColumn+1)
		if a.Op == plan.MergeFreq {
			ncols = max(ncols, a.BaseColumn+2) // the NULL count
		}
	}
	fetchFormats := make([]int16, ncols)
	for i := range fetchFormats {
		fetchFormats[i] = 1
	}
	for _, a := range p.Aggs {
		if a.Op == plan.MergeHLL || a.Op == plan.MergeTheta || a.Op == plan.MergeFreq {
			fetchFormats[a.BaseColumn] = 0 // text, hashed or counted here
		}
	}
	f := &fetched{strategy: plan.MergeProxy}
	fetchSQL := p.FetchSQL
	if p.Merge == plan.MergeServer {
		if p.ServerFetchSQL == "" {
			return nil, ErrNoServerMerge
		}
		fetchSQL, f.strategy = p.ServerFetchSQL, plan.MergeServer
	}
	fst := statement(fetchSQL, p.Params, p.FetchParams, x.params, fetchFormats)
	bindLifted(&fst, p.Lifted)
	if x.cache != nil {
		if sql, ok := cachedFetch(x.cache, p, f.strategy == plan.MergeServer, fst, ncols, p.Params+len(p.Lifted)+1); ok {
			// The key names the proxy-merge statement whichever runs:
			// both give the same merged groups.
			f.cache, f.key = x.cache, cacheKey(x.scope, p, fst)
			f.ent = x.cache.get(f.key)
			fst.SQL = sql
			fst.ParamOIDs = append(fst.ParamOIDs, pgtype.TextOID)
			var tok []byte
			if f.ent != nil {
				tok = []byte(f.ent.token)
			}
			fst.Params = append(fst.Params, tok)
			if len(fst.ParamFormats) > 0 {
				fst.ParamFormats = append(fst.ParamFormats, 0)
			}
			if p.Fetch.Inserts != nil {
				var snap []byte
				if f.ent != nil && f.ent.inserts != nil && f.ent.inserts.snap != "" {
					snap = []byte(f.ent.inserts.snap)
				}
				fst.ParamOIDs = append(fst.ParamOIDs, pgtype.TextOID)
				fst.Params = append(fst.Params, snap)
				if len(fst.ParamFormats) > 0 {
					fst.ParamFormats = append(fst.ParamFormats, 0)
				}
			}
		}
	}
	var res, base *upstream.Result
	var err error
	if p.BaseRead == nil {
		res, err = x.q.Query(ctx, fst)
	} else {
		res, base, err = x.q.QueryPair(ctx, fst, func(res *upstream.Result) (*upstream.Statement, error) {
			return x.baseStatement(p, res, fetchFormats)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("exec: fetch: %w", err)
	}
	if len(res.Fields) != ncols {
		return nil, fmt.Errorf("%w: fetch returned %d columns, the plan has %d", ErrData, len(res.Fields), ncols)
	}
	if err := f.sort(res); err != nil {
		return nil, err
	}
	if base != nil {
		if err := f.addBase(p, base); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// sort sorts the fetch's rows by the part each belongs to.
func (f *fetched) sort(res *upstream.Result) error {
	var other [][][]byte
	tokens, infos := 0, 0
	for _, r := range res.Rows {
		if len(r) != len(res.Fields) {
			return fmt.Errorf("%w: fetch row of %d columns", ErrData, len(r))
		}
		switch part := string(r[0]); {
		case part == "rollup":
			f.rollupRows = append(f.rollupRows, r)
		case part == plan.InfoPrefix+plan.NotSource:
			return ErrNotSource
		case strings.HasPrefix(part, plan.InfoPrefix):
			n, err := strconv.ParseInt(strings.TrimPrefix(part, plan.InfoPrefix), 10, 64)
			if err != nil {
				return fmt.Errorf("%w: fetch info row %q", ErrData, part)
			}
			f.changed, infos = n, infos+1
		case f.cache != nil && strings.HasPrefix(part, tokenPrefix):
			f.token, tokens = strings.TrimPrefix(part, tokenPrefix), tokens+1
		case f.cache != nil && strings.HasPrefix(part, insertsPrefix):
			how, snap, ok := strings.Cut(strings.TrimPrefix(part, insertsPrefix), ":")
			if f.insertsInfo || !ok || (how != "delta" && how != "full") {
				return fmt.Errorf("%w: fetch row %q", ErrData, part)
			}
			f.insertsInfo, f.insertsDelta, f.insertsSnap = true, how == "delta", snap
		case strings.HasPrefix(part, plan.SpanPrefix):
			// Read by the plan's BaseRead statement.
		case part == plan.InsertedPart:
			f.inserted = append(f.inserted, r)
			other = append(other, r)
		default:
			other = append(other, r)
		}
	}
	if infos != 1 {
		return fmt.Errorf("%w: fetch returned %d info rows", ErrData, infos)
	}
	if f.cache != nil && tokens != 1 {
		return fmt.Errorf("%w: fetch returned %d cache tokens", ErrData, tokens)
	}
	if f.insertsDelta {
		// The rows inserted before the entry's snapshot are the entry's.
		if f.ent == nil || f.ent.inserts == nil {
			return fmt.Errorf("%w: the fetch read the inserted rows since a snapshot the cache does not hold", ErrData)
		}
		other = append(other, f.ent.inserts.rows...)
	}
	res.Rows = other
	f.res = res
	return nil
}

// rollupPart is the fetch's rollup half: the cache's, when the token the
// fetch returned is the one the cache holds (and the fetch then skipped
// the rollup), or built from the rollup rows and cached.
func (f *fetched) rollupPart(p *plan.Rollup) (*rollupPart, error) {
	if f.cache != nil && f.ent != nil && f.token == f.ent.token {
		// The rollup half was skipped: only an aggregate without
		// GROUP BY returns its one row of NULLs.
		for _, r := range f.rollupRows {
			for _, v := range r[1+len(p.Keys):] {
				if v != nil {
					return nil, fmt.Errorf("%w: the fetch read the rollup though the cache holds its rows", ErrData)
				}
			}
		}
		f.fromCache = true
		f.cache.count(true)
		f.keepEntry(p, f.ent.part)
		return f.ent.part, nil
	}
	if f.cache != nil {
		f.cache.count(false)
	}
	part, err := buildPart(p, f.rollupRows)
	if err != nil {
		return nil, err
	}
	f.keepEntry(p, part)
	return part, nil
}

// cachedInserts reports whether the fetch read only the rows inserted
// since the cache entry's read of them, and the entry holds some.
func (f *fetched) cachedInserts() bool {
	return f.insertsDelta && len(f.ent.inserts.rows) > 0
}

// keepEntry caches part with the fetch's token, and the inserted rows
// the answer holds with the snapshot they were read in, when the
// statement had no transaction ID (else without them). A token without the
// version (the rollup is gone) is not cached.
func (f *fetched) keepEntry(p *plan.Rollup, part *rollupPart) {
	if f.cache == nil || strings.HasPrefix(f.token, "|") {
		return
	}
	ent := &cacheEntry{key: f.key, token: f.token, part: part}
	if p.Fetch.Inserts != nil && f.insertsSnap != "" {
		ent.inserts = newInsertsState(f.insertsSnap, f.insertsDelta, f.ent, f.inserted)
	} else if f.fromCache {
		// Nothing new to keep: the entry's rows, and its inserted rows
		// if any, are still those of its token and snapshot.
		return
	}
	f.cache.putEntry(ent.sized())
}

// runExact runs the plan's exact statement, if it has one: the counts
// that no sketch gives (a distinct count of a dimension, say).
func (x *run) exact(ctx context.Context, p *plan.Rollup) (*upstream.Result, error) {
	if p.ExactSQL == "" {
		return nil, nil
	}
	nexact := len(p.Keys)
	for _, a := range p.Aggs {
		nexact = max(nexact, a.ExactColumn+1)
	}
	exact, err := x.q.Query(ctx, statement(p.ExactSQL, p.Params, p.ExactParams, x.params, []int16{1}))
	if err != nil {
		return nil, fmt.Errorf("exec: exact: %w", err)
	}
	if len(exact.Fields) != nexact {
		return nil, fmt.Errorf("%w: exact statement returned %d columns, want %d", ErrData, len(exact.Fields), nexact)
	}
	return exact, nil
}
