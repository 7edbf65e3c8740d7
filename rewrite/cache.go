package rewrite

import (
	"slices"
	"strings"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// cacheability says whether the rows a fetch's rollup arm returns are
// decided by the statement's text, the client's parameters, the session's
// settings and the cache's token (which covers the bucket range) alone.
// exprs are what the arm reads beyond its bucket range: the group keys
// and the filters. A call whose value changes from one statement to the
// next (now(), random(), a sequence), or that reads the session beyond
// the settings the cache's scope holds (current_setting, the role, a
// catalog function, money's and to_char's locale), a subquery, or a
// literal naming a relative time ('today') keeps it from the cache.
func cacheability(exprs []syntax.Expr) plan.Cacheability {
	var c plan.Cacheability
	for _, e := range exprs {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if why := uncacheable(x); why != "" && c.Why == "" {
				c.Why = why
			}
			if p, ok := x.(*syntax.Param); ok && !slices.Contains(c.Params, p.N) {
				c.Params = append(c.Params, p.N)
			}
			return true
		})
	}
	slices.Sort(c.Params)
	return c
}

// shapeCacheability says whether the answer of the shaping statement of s
// may be kept: what it evaluates over the merged groups (the select list,
// HAVING, ORDER BY, LIMIT and OFFSET) is judged as a rollup arm's keys and
// filters are. WHERE and GROUP BY are not: the groups hold their effect.
func shapeCacheability(s *syntax.Select) *plan.Cacheability {
	exprs := []syntax.Expr{s.Having, s.Limit, s.Offset}
	for _, t := range s.Targets {
		exprs = append(exprs, t.Expr)
	}
	for _, o := range s.OrderBy {
		exprs = append(exprs, o.Expr)
	}
	c := cacheability(slices.DeleteFunc(exprs, func(e syntax.Expr) bool { return e == nil }))
	return &c
}

// uncacheable says why expression node x keeps a rollup arm from the
// cache, or "".
func uncacheable(x syntax.Expr) string {
	switch x := x.(type) {
	case *syntax.FuncCall:
		if name := strings.ToLower(x.Name[len(x.Name)-1]); volatileCall(name) {
			return "it calls " + name
		}
	case *syntax.VarFunc:
		if x.Name != "coalesce" && x.Name != "greatest" && x.Name != "least" {
			return "it reads " + x.Name
		}
	case *syntax.Cast:
		if t := strings.ToLower(strings.Join(x.Type.Names, ".")); strings.Contains(t, "money") || strings.Contains(t, "reg") {
			return "it casts to " + t
		}
	case *syntax.Const:
		if x.Type == "str" && plan.NamesRelativeTime(x.Val) {
			return "it quotes a relative time"
		}
	case *syntax.Unsupported:
		if x.Link != nil || x.What == "a subquery" {
			return "it holds a subquery"
		}
	}
	return ""
}

// volatileCall reports whether a function of this name gives other values
// from one statement to the next, or reads the session beyond its scope.
func volatileCall(name string) bool {
	for _, p := range []string{"pg_", "txid", "current_", "to_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return strings.Contains(name, "timestamp") || strings.Contains(name, "xact") || slices.Contains([]string{
		"now", "timeofday", "age", "random", "random_normal", "setseed", "nextval", "currval", "lastval",
		"set_config", "session_user", "localtime", "localtimestamp", "gen_random_uuid", "uuid_generate_v4", "clock_timestamp",
	}, name)
}

// quotesRelativeTime reports whether a string literal of sql holds 'now',
// 'today', 'tomorrow' or 'yesterday' (see plan.NamesRelativeTime).
// PostgreSQL reads such a literal when it parses the statement, so a
// statement prepared once would keep the moment it was prepared at; now()
// and parameters are read when it runs and do not count.
func quotesRelativeTime(sql string) bool {
	for i := 0; i < len(sql); i++ {
		if sql[i] != '\'' {
			continue
		}
		j := i + 1
		for j < len(sql) {
			if sql[j] == '\'' {
				if j+1 < len(sql) && sql[j+1] == '\'' {
					j += 2
					continue
				}
				break
			}
			j++
		}
		if plan.NamesRelativeTime(sql[i+1 : min(j, len(sql))]) {
			return true
		}
		i = j
	}
	return false
}
