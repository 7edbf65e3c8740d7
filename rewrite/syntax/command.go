package syntax

import (
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Command is a statement the proxy carries out itself instead of a query:
// SHOW of a pgsketch setting, or a call of pgsketch.refresh_rollup with
// literal arguments. Anything else (a refresh call with a parameter, in a
// larger statement) goes to PostgreSQL, which explains itself.
type Command struct {
	// Show names the setting a SHOW pgsketch.<name> reads: approx, merge
	// or topk.
	Show string
	// Refresh is a refresh call's arguments.
	Refresh *RefreshCall
}

// RefreshCall is SELECT pgsketch.refresh_rollup(name [, full_rebuild [,
// from_time [, to_time]]]), positional or named.
type RefreshCall struct {
	Name     string
	Full     bool
	From, To string
}

// showable are the pgsketch settings the proxy answers SHOW of.
var showable = map[string]bool{"approx": true, "merge": true, "topk": true}

// ParseCommand recognizes sql as a Command; ok is false for anything else.
func ParseCommand(sql string) (c Command, ok bool) {
	if !ContainsFold(sql, "refresh_rollup") && !ContainsFold(sql, "show") {
		return c, false
	}
	if CheckLimits(sql) != nil {
		return c, false // the parser is not to see it (see Rewrite)
	}
	tree, err := parseTree(sql)
	if err != nil || len(tree.GetStmts()) != 1 {
		return c, false
	}
	n := tree.GetStmts()[0].GetStmt()
	if sh := n.GetVariableShowStmt(); sh != nil {
		name, found := strings.CutPrefix(sh.GetName(), "pgsketch.")
		if !found || !showable[name] {
			return c, false
		}
		return Command{Show: name}, true
	}
	call, ok := refreshCall(n.GetSelectStmt())
	if !ok {
		return c, false
	}
	return Command{Refresh: call}, true
}

// refreshArgs are refresh_rollup's parameters, in order.
var refreshArgs = []string{"name", "full_rebuild", "from_time", "to_time"}

// refreshCall reads SELECT pgsketch.refresh_rollup(...) and nothing else:
// one target without an alias, no clause, plain literal arguments.
func refreshCall(s *pg.SelectStmt) (*RefreshCall, bool) {
	if s == nil || len(s.GetTargetList()) != 1 || s.GetFromClause() != nil || s.GetWhereClause() != nil ||
		s.GetGroupClause() != nil || s.GetHavingClause() != nil || s.GetSortClause() != nil || s.GetLimitCount() != nil ||
		s.GetLimitOffset() != nil || s.GetWithClause() != nil || s.GetDistinctClause() != nil || s.GetIntoClause() != nil ||
		s.GetLockingClause() != nil || s.GetValuesLists() != nil || s.GetOp() != pg.SetOperation_SETOP_NONE {
		return nil, false
	}
	t := s.GetTargetList()[0].GetResTarget()
	f := t.GetVal().GetFuncCall()
	if t.GetName() != "" || f == nil || f.GetAggStar() || f.GetAggDistinct() || f.GetOver() != nil || f.GetAggFilter() != nil ||
		f.GetAggOrder() != nil || f.GetFuncVariadic() {
		return nil, false
	}
	if name, ok := strs(f.GetFuncname()); !ok || len(name) != 2 || name[0] != "pgsketch" || name[1] != "refresh_rollup" {
		return nil, false
	}
	args := f.GetArgs()
	if len(args) == 0 || len(args) > len(refreshArgs) {
		return nil, false
	}
	c, set := &RefreshCall{}, map[string]bool{}
	for i, a := range args {
		key := refreshArgs[i]
		if na := a.GetNamedArgExpr(); na != nil {
			key, a = na.GetName(), na.GetArg()
		}
		if set[key] || !c.set(key, a.GetAConst()) {
			return nil, false
		}
		set[key] = true
	}
	return c, set["name"]
}

// set sets the argument key to the literal v, which must be a string but
// for full_rebuild, a boolean.
func (c *RefreshCall) set(key string, v *pg.A_Const) bool {
	if v == nil || v.GetIsnull() {
		return false
	}
	if key == "full_rebuild" {
		b := v.GetBoolval()
		c.Full = b.GetBoolval()
		return b != nil
	}
	s := v.GetSval()
	if s == nil {
		return false
	}
	switch key {
	case "name":
		c.Name = s.GetSval()
	case "from_time":
		c.From = s.GetSval()
	case "to_time":
		c.To = s.GetSval()
	default:
		return false
	}
	return true
}
