package handler

import (
	"fmt"
	"regexp"
	"strings"
)

// refreshCall is a parsed SELECT pgsketch.refresh_rollup(...).
type refreshCall struct {
	name     string
	full     bool
	from, to string
}

var refreshRE = regexp.MustCompile(`(?is)^\s*select\s+pgsketch\s*\.\s*refresh_rollup\s*\((.*)\)\s*;?\s*$`)

var refreshArgs = []string{"name", "full_rebuild", "from_time", "to_time"}

// parseRefresh recognizes the call with literal arguments, positional or
// named (name, full_rebuild, from_time, to_time). ok is false for anything
// else, which then goes to PostgreSQL and its explanatory error.
func parseRefresh(sql string) (c refreshCall, ok bool) {
	m := refreshRE.FindStringSubmatch(sql)
	if m == nil {
		return c, false
	}
	args, ok := splitArgs(m[1])
	if !ok || len(args) == 0 || len(args) > len(refreshArgs) {
		return c, false
	}
	set := map[string]bool{}
	for i, a := range args {
		key := refreshArgs[min(i, len(refreshArgs)-1)]
		if k, v, named := strings.Cut(a, "=>"); named {
			key, a = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		} else if len(set) > i { // positional after named
			return c, false
		}
		if set[key] {
			return c, false
		}
		set[key] = true
		switch key {
		case "full_rebuild":
			switch strings.ToLower(a) {
			case "true":
				c.full = true
			case "false":
			default:
				return c, false
			}
		case "name", "from_time", "to_time":
			s, ok := unquote(a)
			if !ok {
				return c, false
			}
			switch key {
			case "name":
				c.name = s
			case "from_time":
				c.from = s
			default:
				c.to = s
			}
		default:
			return c, false
		}
	}
	return c, set["name"]
}

// splitArgs splits at commas outside single quotes and trims each part.
func splitArgs(s string) ([]string, bool) {
	var out []string
	start, inQ := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'':
			inQ = !inQ
		case ',':
			if !inQ {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if inQ {
		return nil, false
	}
	return append(out, strings.TrimSpace(s[start:])), true
}

// unquote reads a standard SQL string literal.
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	body := s[1 : len(s)-1]
	if strings.Count(body, "'")%2 != 0 || strings.Contains(strings.ReplaceAll(body, "''", ""), "'") {
		return "", false
	}
	return strings.ReplaceAll(body, "''", "'"), true
}

func (c refreshCall) String() string {
	return fmt.Sprintf("refresh_rollup(%q, full=%v, from=%q, to=%q)", c.name, c.full, c.from, c.to)
}
