package rewrite

// Limits checked before parsing. The C parser recurses on nested
// expressions and can overflow the C stack, which kills the process; these
// caps keep its input far from that.
const (
	// MaxQueryBytes is the longest SQL text the rewriter parses.
	MaxQueryBytes = 64 << 10
	// MaxNestingDepth is the deepest nesting of parentheses and brackets
	// the rewriter parses.
	MaxNestingDepth = 64
)

// Prefilter reports whether sql could be rewritten at all: whether it
// mentions COUNT and DISTINCT, APPROX_COUNT_DISTINCT, or pgsketch, in any
// letter case. It allocates nothing and runs in time linear in len(sql).
func Prefilter(sql string) bool {
	return containsFold(sql, "distinct") && containsFold(sql, "count") ||
		containsFold(sql, "pgsketch")
}

// containsFold reports whether s contains word (lower-case ASCII) in any
// letter case.
func containsFold(s, word string) bool {
	n := len(word)
	first := word[0]
	for i := 0; i+n <= len(s); i++ {
		if s[i]|0x20 != first {
			continue
		}
		j := 1
		for j < n && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// nestingDepth returns the deepest nesting of ( and [ in sql outside string
// literals, quoted identifiers and comments, stopping early once it exceeds
// limit. Dollar-quoted strings are not tracked: their contents count, which
// errs on the side of refusing.
func nestingDepth(sql string, limit int) int {
	depth, max := 0, 0
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; c {
		case '(', '[':
			depth++
			if depth > max {
				max = depth
				if max > limit {
					return max
				}
			}
		case ')', ']':
			if depth > 0 {
				depth--
			}
		case '\'', '"':
			for i++; i < len(sql) && sql[i] != c; i++ {
			}
		case '-':
			if i+1 < len(sql) && sql[i+1] == '-' {
				for i += 2; i < len(sql) && sql[i] != '\n'; i++ {
				}
			}
		case '/':
			if i+1 < len(sql) && sql[i+1] == '*' {
				// Block comments nest in PostgreSQL.
				level := 1
				for i += 2; i < len(sql) && level > 0; i++ {
					switch {
					case sql[i] == '*' && i+1 < len(sql) && sql[i+1] == '/':
						level--
						i++
					case sql[i] == '/' && i+1 < len(sql) && sql[i+1] == '*':
						level++
						i++
					}
				}
				i--
			}
		}
	}
	return max
}
