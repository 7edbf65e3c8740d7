package proxy

import (
	"container/list"
	"sync"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/rewrite/plan"
)

// planCache keeps the rewriter's results for the statements sessions send
// again and again (a dashboard's queries, every time it refreshes): the
// rewriter is pure, so a result depends on the statement's text, the
// catalog snapshot and the session's settings alone, and is read-only
// once made. Parsing and planning a statement cost more than the rest of
// a warm answer's work in the proxy (bench-query --profile).
type planCache struct {
	mu    sync.Mutex
	items map[planKey]*list.Element
	lru   list.List // of *planEntry, most recently used first
}

type planKey struct {
	sql  string
	snap *catalog.Snapshot
	rw   rewrite.Session
}

type planEntry struct {
	key   planKey
	res   rewrite.Result
	exact string
}

const (
	// maxPlans bounds the results kept; a snapshot replaced by a newer
	// catalog is freed once its entries are evicted.
	maxPlans = 1024
	// maxPlanSQL: longer statements are planned every time (their text
	// would be most of the cache's memory).
	maxPlanSQL = 64 << 10
)

// rewrite returns rewrite.Rewrite(sql, snap, rw), kept from an earlier call
// with the same arguments when there was one; and, with a plan, the exact
// statement sql stands for (exactly), whose description PostgreSQL gives
// a simple Query's answer (describe.go).
func (pc *planCache) rewrite(sql string, snap *catalog.Snapshot, rw rewrite.Session) (rewrite.Result, string) {
	if len(sql) > maxPlanSQL {
		return planned(sql, snap, rw)
	}
	k := planKey{sql, snap, rw}
	pc.mu.Lock()
	if e, ok := pc.items[k]; ok {
		pc.lru.MoveToFront(e)
		pe := e.Value.(*planEntry)
		pc.mu.Unlock()
		return pe.res, pe.exact
	}
	pc.mu.Unlock()
	res, exact := planned(sql, snap, rw)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.items == nil {
		pc.items = map[planKey]*list.Element{}
	}
	if _, ok := pc.items[k]; !ok {
		pc.items[k] = pc.lru.PushFront(&planEntry{k, res, exact})
		if pc.lru.Len() > maxPlans {
			old := pc.lru.Back()
			pc.lru.Remove(old)
			delete(pc.items, old.Value.(*planEntry).key)
		}
	}
	return res, exact
}

// planned is what rewrite keeps: the rewriter's result, and with a plan
// that answers the statement the exact statement.
func planned(sql string, snap *catalog.Snapshot, rw rewrite.Session) (rewrite.Result, string) {
	res := rewrite.Rewrite(sql, snap, rw)
	exact := ""
	if p := res.Plan; p != nil && !p.Header().Explain {
		if _, sub := p.(*plan.Substitute); !sub {
			exact, _ = exactly(sql)
		}
	}
	return res, exact
}
