package plan

import (
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
)

// Plan is how to answer one query. The set of plans is closed: *Rollup,
// *Substitute, *Overlap, *Retention, *TopK, *Nested and *FirstSeen. A plan kind is its
// type here, the planner that makes it (package rewrite) and its case in
// the executor's switch (package exec); what else the proxy must know of
// a plan before it runs it is in its Facts.
type Plan interface {
	// Header is what every plan carries.
	Header() *Head
	// Fetches lists the rollup plans whose fetch statements the plan
	// runs: the plan itself for a *Rollup, its arms otherwise, none for a
	// *Substitute.
	Fetches() []*Rollup
	// Facts are what the proxy must know of the plan before running it.
	Facts() Facts
	// Explain prints the plan for EXPLAIN: its statements' SQL in full
	// when verbose, else their size.
	Explain(verbose bool) string
	// String prints the plan with its statements in full (EXPLAIN
	// (VERBOSE), the golden tests, the status page).
	String() string
	// Statements lists every statement the plan would run, for checks.
	Statements() []string
	sealed()
}

// Head is what every plan carries.
type Head struct {
	// Rollup names the rollup (of the first arm, for a plan of several);
	// Source is the base table.
	Rollup string
	Source catalog.Table
	// Session holds the session settings the plan relied on (TimeZone,
	// search_path, user, pgsketch.approx): a cached plan is valid only
	// for a session with the same.
	Session Session
	// Explain is set when the client asked EXPLAIN of the query: show the
	// plan instead of running it; Verbose when it asked EXPLAIN (VERBOSE),
	// which shows the statements' SQL too.
	Explain, Verbose bool
	// Params is the highest $n the query uses.
	Params int
	// Reparse is set when the query quotes 'now', 'today', 'tomorrow' or
	// 'yesterday': PostgreSQL reads such a literal when it parses a
	// statement, so the plan's statements are parsed each time they run,
	// never kept prepared.
	Reparse bool
	// OwnSnapshot is set when a rollup the plan reads has a source Citus
	// distributes: Citus reads each worker in a snapshot of its own, taken
	// when a query first reaches it, so the plan's statements must each
	// run in a REPEATABLE READ transaction of their own in which Citus
	// reads each worker over one connection: the change log's rows and
	// the base rows of a shard then come from one snapshot. A session in
	// a transaction block cannot have that; there the plan is not run.
	OwnSnapshot bool
	// Guard, when set, is a query returning true when the unqualified table
	// of the query resolves to Source in the session; the executor checks
	// it (once per search_path) and passes through on false.
	Guard string
	// Notice is the text of the NoticeResponse sent with the answer.
	Notice string
	// StdErr is the relative standard error of the approximate aggregates
	// (the largest, if they differ); 0 if none is approximate.
	StdErr float64
}

// Header returns h.
func (h *Head) Header() *Head { return h }

// Facts are what the proxy must know of a plan before it runs it.
type Facts struct {
	// InText: the plan may answer one of several statements of a simple
	// Query (its answer is a result set and nothing else).
	InText bool
	// OneSnapshot says why the plan's statements must all see one
	// snapshot; "" when they need not.
	OneSnapshot string
	// ExplainRuns, when set, is what EXPLAIN of the query shows by running
	// the plan ("estimate" or "answer"): its estimate decides whether the
	// proxy answers it at all. Else EXPLAIN shows PostgreSQL's plans of its
	// statements (Explained).
	ExplainRuns string
	// ReadsOverlapError and ReadsTopKMode: the executor reads the
	// session's pgsketch.max_overlap_error or pgsketch.topk, which must
	// then be valid.
	ReadsOverlapError, ReadsTopKMode bool
	// Explained lists the statements whose PostgreSQL plans EXPLAIN shows.
	Explained []Statement
}

// Statement is one of a plan's statements: what it is for, its text and
// the client's $n it references.
type Statement struct {
	What string
	SQL  string
	Refs []int
	// Lifted are literals it binds after the client's parameters
	// (Rollup.Lifted).
	Lifted []string
}

// Substitute runs SQL instead of the query: no rollup answers its
// APPROX_COUNT_DISTINCT, which is then counted exactly rather than failing
// with "function does not exist".
type Substitute struct {
	Head
	SQL string
}

// Overlap counts the distinct values of a set operation of two sets (SetOp
// of Arms[0] and Arms[1], INTERSECT or EXCEPT) from Theta sketches: each
// arm is a Rollup plan of one MergeTheta aggregate without keys, whose
// merged sketch the executor takes (its ShapeSQL is not run). The answer
// is one row of one bigint column named OutputName.
type Overlap struct {
	Head
	SetOp      string
	Arms       []*Rollup
	OutputName string
}

// Retention answers a grid of overlaps between the periods of two sets:
// each arm is a Rollup plan of one key (the period) and one MergeTheta
// aggregate, whose merged sketches per period the executor takes.
type Retention struct {
	Head
	Arms []*Rollup
	// PeriodCondSQL is the condition on a pair of periods, over
	// CellsRelation's pgsketch_a and pgsketch_b ("true" for none); CellSQL
	// counts cells exactly: it binds $1 and $2, arrays of set 1's and set
	// 2's periods, and returns one row (a, b, count) per pair; ShapeSQL
	// shapes the cells into the answer.
	PeriodCondSQL, CellSQL, ShapeSQL string
}

// TopK answers the most frequent values of a column (GROUP BY item ORDER
// BY count(*) DESC LIMIT k, or HAVING count(*) >= T) from frequent-items
// summaries: Arm is a Rollup plan of the other group keys and one
// MergeFreq aggregate, whose merged summaries give candidates and bounds;
// Spec says how they become the answer, and ShapeSQL shapes it over
// GroupsRelation, whose columns are Keys (the query's group keys, the item
// among them) and Aggs (its count).
type TopK struct {
	Head
	Groups
	Spec *TopKSpec
	Arm  *Rollup
}

// Nested answers aggregate subqueries of a larger statement (in FROM, in
// a WITH clause, a UNION ALL's arms) from rollups and lets PostgreSQL do
// the rest: each of Arms is a Rollup plan of one subquery, and the
// statement run is Outer with arm i's shaping statement, parenthesized,
// between Outer[i] and Outer[i+1] (see SQLWith). Every statement sees one
// snapshot.
type Nested struct {
	Head
	Arms []*Rollup
	// Outer is the statement around the arms, in len(Arms)+1 pieces;
	// OuterParams lists the $n the pieces reference.
	Outer       []string
	OuterParams []int
	// Estimated lists the output columns (from 0) that the outer statement
	// returns as a united HLL sketch, in hll_send's bytes, for the
	// executor to replace by pgsketch's estimate of it (a bigint; 0 for
	// NULL, a union of no rows); Columns is the number of output columns.
	// Every other distinct count the outer statement estimates itself,
	// with the same estimator (pgsketch.hll_estimate).
	Estimated []int
	Columns   int
}

// SQLWith is the statement a Nested plan runs: Outer with each arm's
// shaping statement (shapes[i], as the executor built it over the arm's
// merged groups) in its place.
func (p *Nested) SQLWith(shapes []string) string {
	var b strings.Builder
	for i, piece := range p.Outer {
		b.WriteString(piece)
		if i < len(shapes) {
			b.WriteString("(" + shapes[i] + ")")
		}
	}
	return b.String()
}

// FirstSeen counts keys by their first bucket (new users per day, new
// users in a range) from a rollup's first-seen bookkeeping
// (catalog.FirstSeen), exactly: SQL is the query with its per-key
// subquery (SELECT key, f(min(time)) ... GROUP BY key [HAVING a range of
// min(time)]) replaced by the rows of pgsketch.first_seen, one per bucket
// with its number of keys, and each count(*) over it by their sum.
// PostgreSQL shapes the answer; the function refuses (55000) where its
// tables cannot say exactly, and the statement is then answered by
// PostgreSQL. Refs lists the client's $n the SQL references.
type FirstSeen struct {
	Head
	SQL  string
	Refs []int
}

func (*Rollup) sealed()     {}
func (*Substitute) sealed() {}
func (*Overlap) sealed()    {}
func (*Retention) sealed()  {}
func (*TopK) sealed()       {}
func (*Nested) sealed()     {}
func (*FirstSeen) sealed()  {}

func (p *Rollup) Fetches() []*Rollup     { return []*Rollup{p} }
func (p *Substitute) Fetches() []*Rollup { return nil }
func (p *Overlap) Fetches() []*Rollup    { return p.Arms }
func (p *Retention) Fetches() []*Rollup  { return p.Arms }
func (p *TopK) Fetches() []*Rollup       { return []*Rollup{p.Arm} }
func (p *Nested) Fetches() []*Rollup     { return p.Arms }
func (p *FirstSeen) Fetches() []*Rollup  { return nil }

// Facts of a Rollup plan: EXPLAIN shows PostgreSQL's plans of the fetch
// (the merge strategy's) and of the exact statement.
func (p *Rollup) Facts() Facts {
	fetch := p.FetchSQL
	if p.Merge == MergeServer && p.ServerFetchSQL != "" {
		fetch = p.ServerFetchSQL
	}
	f := Facts{InText: true, Explained: []Statement{{What: "fetch", SQL: fetch, Refs: p.FetchParams, Lifted: p.Lifted}}}
	if p.ExactSQL != "" {
		f.Explained = append(f.Explained, Statement{What: "exact", SQL: p.ExactSQL, Refs: p.ExactParams})
	}
	return f
}

// Facts of a Substitute plan: the proxy relays its statement.
func (p *Substitute) Facts() Facts { return Facts{InText: true} }

// Facts of a FirstSeen plan: EXPLAIN shows PostgreSQL's plan of its
// statement.
func (p *FirstSeen) Facts() Facts {
	return Facts{InText: true, Explained: []Statement{{What: "first-seen", SQL: p.SQL, Refs: p.Refs}}}
}

// Facts of an Overlap plan.
func (p *Overlap) Facts() Facts { return Facts{ExplainRuns: "estimate", ReadsOverlapError: true} }

// Facts of a Retention plan.
func (p *Retention) Facts() Facts { return Facts{ExplainRuns: "estimate", ReadsOverlapError: true} }

// Facts of a TopK plan: a verified top-k reads the summaries and counts
// the candidates in two statements.
func (p *TopK) Facts() Facts {
	f := Facts{ExplainRuns: "answer", ReadsTopKMode: true}
	if p.Session.TopK != TopKApprox {
		f.OneSnapshot = "a verified top-k reads the summaries and counts the candidates in two statements"
	}
	return f
}

// Facts of a Nested plan: the outer statement joins the arms' answers to
// what else it reads, as PostgreSQL would in one statement.
func (p *Nested) Facts() Facts {
	return Facts{OneSnapshot: "a statement with subqueries answered from rollups reads them and runs the statement around them in several statements"}
}
