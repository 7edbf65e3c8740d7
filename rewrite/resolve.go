package rewrite

import (
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// constantClause checks a LIMIT or OFFSET expression: the shaping SQL
// evaluates it as written, so it may hold only literals, parameters and
// scalar functions of them.
func constantClause(e syntax.Expr) string {
	var why string
	syntax.Walk(e, func(x syntax.Expr) bool {
		if why != "" {
			return false
		}
		switch x := x.(type) {
		case *syntax.Unsupported:
			why = "uses " + x.What
		case *syntax.ColRef:
			why = "references a column"
		case *syntax.FuncCall:
			if classifyAgg(x) != notAgg {
				why = "uses an aggregate"
			}
		}
		return why == ""
	})
	return why
}

// unknownFunctions names the first call in the query that is neither an
// aggregate the rewriter knows nor a scalar function of scalarFuncs, or
// the first operator that is not a built-in's (a user's operator may call a
// volatile function, which a rollup's rows would call once per group).
func unknownFunctions(s *syntax.Select) string {
	var why string
	check := func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if why != "" {
				return false
			}
			op := ""
			switch x := x.(type) {
			case *syntax.OpExpr:
				if x.Schema != "" && x.Schema != "pg_catalog" {
					op = x.Schema + "." + x.Op
				} else if !builtinOperators[x.Op] {
					op = x.Op
				}
			case *syntax.KeywordExpr:
				if (x.Fn == "ANY" || x.Fn == "ALL") && !builtinOperators[x.Kw] {
					op = x.Kw
				}
			}
			if op != "" {
				why = "operator " + op + " is not one the rewriter knows to be built in"
				return false
			}
			f, ok := x.(*syntax.FuncCall)
			if !ok || classifyAgg(f) != notAgg {
				return true
			}
			if name, builtin := f.Builtin(); builtin && scalarFuncs[name] {
				return true
			}
			why = "function " + syntax.NameSQL(f.Name) + "() is not one the rewriter knows to be an immutable or stable scalar function"
			return false
		})
	}
	s.EachExpr(check)
	return why
}

// pgCatalogFirst refuses a search_path that names pg_catalog after another
// schema: unqualified functions and operators might then not be the
// built-ins the rewriter reasons about.
func pgCatalogFirst(sess env) string {
	for i, schema := range searchPath(sess) {
		if schema == "pg_catalog" && i > 0 {
			return "search_path puts pg_catalog after other schemas, so unqualified functions and operators may not be the built-ins"
		}
	}
	return ""
}

// resolveTable finds the rollups of the table a FROM item names, resolving
// an unqualified name along the session's search_path. It returns the table
// as printed in reasons.
func resolveTable(fi syntax.FromItem, snap *catalog.Snapshot, sess env) (string, []*catalog.Rollup) {
	if fi.Schema != "" {
		t := catalog.Table{Schema: fi.Schema, Name: fi.Name}
		return t.String(), snap.ForSource(t)
	}
	for _, schema := range searchPath(sess) {
		t := catalog.Table{Schema: schema, Name: fi.Name}
		if rs := snap.ForSource(t); len(rs) > 0 {
			return t.String(), rs
		}
	}
	return catalog.QuoteIdent(fi.Name) + " (search_path " + strings.Join(searchPath(sess), ", ") + ")", nil
}

// searchPath splits a search_path setting into schema names.
func searchPath(sess env) []string {
	sp := sess.SearchPath
	if strings.TrimSpace(sp) == "" {
		sp = `"$user", public`
	}
	var out []string
	for _, item := range strings.Split(sp, ",") {
		item = strings.TrimSpace(item)
		if strings.HasPrefix(item, `"`) && strings.HasSuffix(item, `"`) && len(item) >= 2 {
			item = strings.ReplaceAll(item[1:len(item)-1], `""`, `"`)
		} else {
			item = strings.ToLower(item)
		}
		if item == "$user" {
			if sess.User == "" {
				continue
			}
			item = sess.User
		}
		if item != "" {
			out = append(out, item)
		}
	}
	return out
}

// --- matching one rollup ---------------------------------------------------

// matcher holds the state of matching one query against one rollup.
type matcher struct {
	s *syntax.Select
	// sketch is the kind of sketch that answers the distinct counts: HLL,
	// Theta for an overlap's arms, top-k for a top-k's summaries.
	sketch catalog.Aggregate
	fi     syntax.FromItem
	r      *catalog.Rollup
	sess   env
	// lift numbers the string literals of the time bounds the fetch binds
	// as parameters, while it is printed (see liftBounds); lo and hi are
	// the bucket range's bounds as plan.BoundsRelation computes them.
	lift   map[*syntax.Const]int
	lo, hi string
	keys   []*keyInfo
	aggs   []*aggInfo
	// pushed are WHERE conjuncts answered on both halves.
	pushed []syntax.Expr
	// ranges are the WHERE conjuncts that bound the raw time column.
	ranges []syntax.Expr
	lower  []bound
	upper  []bound
	exact  bool
	// notNullNow are the columns whose NOT NULL declaration an answer
	// relies on (count(id) as count(*)), which the fetch checks when it
	// runs, in the table and every table inheriting from it.
	notNullNow []string
	// zoneRules: a key or filter is constant on the rollup's buckets by
	// the rules of a time zone with clock changes, which pgsketch checks
	// from 1970 on (zones.go); the fetch then checks that the rollup has no
	// bucket before 1970.
	zoneRules bool
}

type keyInfo struct {
	e     syntax.Expr
	canon string
	name  string
}

// scalarCall reports whether f calls a built-in scalar function the
// rewriter knows to be immutable or stable.
func scalarCall(f *syntax.FuncCall) bool {
	name, builtin := f.Builtin()
	return builtin && scalarFuncs[name] && classifyAgg(f) == notAgg
}

// builtinOperators are the names of PostgreSQL's built-in operators (all
// immutable or stable for the built-in types they take).
var builtinOperators = func() map[string]bool {
	m := map[string]bool{}
	for _, op := range strings.Fields(`= <> < > <= >= + - * / % ^ || ~ !~ ~* !~* ~~ !~~ ~~* !~~* @> <@ && ? ?| ?& -> ->> #> #>> #- @@ @@@ & | # << >> <<= >>= |/ ||/ @ -|- &< &> <-> ^@ @? !! <^ >^ ?# ?- ?|| ?-| ## <<| |>> &<| |&> ~=`) {
		m[op] = true
	}
	return m
}()
