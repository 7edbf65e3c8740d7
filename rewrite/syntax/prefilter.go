package syntax

import "fmt"

// Limits checked before parsing. The C parser and the code that converts its
// tree recurse on nested expressions and overflow the C stack, which kills
// the process, not just the query: a chain of about 25,000 binary operators
// without a single parenthesis (`1+1+...`, `x::int::int...`, `a JOIN b ON
// true JOIN ...`) does it as surely as deep parentheses. These caps keep the
// parser's input far from that: the tree is never deeper than the nesting
// depth plus the number of operators and words, both bounded here.
const (
	// MaxQueryBytes is the longest SQL text the rewriter parses.
	MaxQueryBytes = 64 << 10
	// MaxNestingDepth is the deepest nesting of parentheses and brackets
	// the rewriter parses.
	MaxNestingDepth = 64
	// MaxTokens is the most operator characters plus words (keywords and
	// identifiers) the rewriter parses: every level of an unparenthesized
	// chain (operators, casts, NOT, CASE, AT TIME ZONE, COLLATE, JOIN,
	// UNION) costs at least one of them. Literals, numbers, commas and
	// parameters do not count, so long IN lists stay cheap.
	MaxTokens = 3000
)

// Prefilter reports whether sql could be rewritten at all: whether it
// mentions COUNT and DISTINCT, APPROX_COUNT_DISTINCT, COUNT and INTERSECT or
// EXCEPT, COUNT and GROUP with LIMIT or HAVING (a top-k) or MIN (keys by
// their first time), or pgsketch, in any letter case. It allocates nothing and runs in time linear in
// len(sql).
func Prefilter(sql string) bool {
	// One pass over sql: every word the rule names starts with a letter no
	// other starts with, so a byte decides which word to try at it.
	var seen prefilterWords
	for i := 0; i < len(sql); i++ {
		k := prefilterStarts[sql[i]]
		if k == 0 {
			continue
		}
		w := prefilterWords(1) << (k - 1)
		if seen&w == 0 && hasPrefixFold(sql[i:], prefilterList[k-1]) {
			seen |= w
			if seen.rewritable() {
				return true
			}
		}
	}
	return false
}

// prefilterWords is the set of words Prefilter has met, a bit per word of
// prefilterList.
type prefilterWords uint16

const (
	wordCount prefilterWords = 1 << iota
	wordDistinct
	wordIntersect
	wordExcept
	wordGroup
	wordLimit
	wordHaving
	wordPgsketch
	wordMin
)

// prefilterList holds the words in the order of their bits.
var prefilterList = [...]string{"count", "distinct", "intersect", "except", "group", "limit", "having", "pgsketch", "min"}

// prefilterStarts maps a byte to 1 + the index in prefilterList of the word
// it starts, in either letter case, or to 0.
var prefilterStarts = func() (t [256]uint8) {
	for i, w := range prefilterList {
		if t[w[0]] != 0 {
			panic("prefilter: two words start with " + w[:1])
		}
		t[w[0]] = uint8(i + 1)
		t[w[0]-'a'+'A'] = uint8(i + 1)
	}
	return t
}()

// rewritable is Prefilter's rule over the words met.
func (w prefilterWords) rewritable() bool {
	has := func(x prefilterWords) bool { return w&x != 0 }
	return has(wordPgsketch) || has(wordCount) && (has(wordDistinct) || has(wordIntersect) || has(wordExcept) ||
		has(wordGroup) && (has(wordLimit) || has(wordHaving) || has(wordMin)))
}

// hasPrefixFold reports whether s starts with word (lower-case ASCII
// letters, digits and underscores) in any letter case.
func hasPrefixFold(s, word string) bool {
	if len(s) < len(word) {
		return false
	}
	for j := 0; j < len(word); j++ {
		if !foldEq(s[j], word[j]) {
			return false
		}
	}
	return true
}

// ContainsFold reports whether s contains word (lower-case ASCII letters,
// digits and underscores) in any letter case.
func ContainsFold(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if foldEq(s[i], word[0]) && hasPrefixFold(s[i:], word) {
			return true
		}
	}
	return false
}

// foldEq reports whether c is w, or its upper case when w is a lower-case
// letter: for such a w, c|0x20 == w exactly when c is w or W.
func foldEq(c, w byte) bool {
	if w >= 'a' && w <= 'z' {
		return c|0x20 == w
	}
	return c == w
}

// identByte reports whether c can continue an identifier (PostgreSQL's
// ident_cont: letters, digits, _, $ and every byte of a multibyte character).
func identByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// identStart reports whether c can start an identifier.
func identStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

// scanStats is what scan measures of a text.
type scanStats struct {
	Depth  int   // deepest nesting of ( and [
	tokens int   // operator characters plus words
	Params []int // $n parameters, in order of appearance (when wanted)
}

// Scan lexes sql the way PostgreSQL's lexer does as far as nesting goes:
// it skips standard strings ('...' with ” inside), escape strings (E'...'
// with backslash escapes), dollar-quoted strings ($$...$$, $tag$...$tag$),
// quoted identifiers and comments (-- and nested /* */), and measures the
// rest. It stops early once depth exceeds maxDepth or tokens exceeds
// maxTokens. An unterminated literal or comment ends the scan: the parser
// rejects such a text before it builds any tree from what follows. When in
// doubt it counts: counting too much only refuses a text.
func Scan(sql string, maxDepth, maxTokens int, wantParams bool) scanStats {
	var st scanStats
	depth := 0
	n := len(sql)
	for i := 0; i < n; i++ {
		c := sql[i]
		switch {
		case c == '(' || c == '[':
			depth++
			if depth > st.Depth {
				st.Depth = depth
				if st.Depth > maxDepth {
					return st
				}
			}
		case c == ')' || c == ']':
			if depth > 0 {
				depth--
			}
		case c == '\'':
			i = skipQuoted(sql, i, false)
		case c == '"':
			i = skipQuotedIdent(sql, i)
		case c == '-' && i+1 < n && sql[i+1] == '-':
			i = skipLineComment(sql, i)
		case c == '/' && i+1 < n && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		case c == '$':
			if i+1 < n && sql[i+1] >= '0' && sql[i+1] <= '9' {
				// A parameter $n.
				var v int
				v, i = readParam(sql, i)
				if wantParams {
					st.Params = append(st.Params, v)
				}
				continue
			}
			if end, quoted := skipDollarQuote(sql, i); quoted {
				if end < 0 {
					return st
				}
				i = end
				continue
			}
			st.tokens++
		case (c == 'e' || c == 'E') && i+1 < n && sql[i+1] == '\'':
			// An escape string; a word ending in e is handled below, so
			// this E starts a token.
			i = skipQuoted(sql, i+1, true)
		case identStart(c):
			st.tokens++
			i = skipWord(sql, i)
		case c >= '0' && c <= '9', c == '.', c == ',', c == ';', c == ' ', c == '\t', c == '\n', c == '\r', c == '\f':
		default:
			// Operator characters and anything unusual.
			st.tokens++
		}
		if st.tokens > maxTokens {
			return st
		}
	}
	return st
}

// skipQuotedIdent returns the index of the quote that closes the quoted
// identifier opening at sql[i], or len(sql) if it is unterminated.
func skipQuotedIdent(sql string, i int) int {
	n := len(sql)
	for i++; i < n && sql[i] != '"'; i++ {
	}
	return i
}

// skipLineComment returns the index of the newline that ends the --
// comment starting at sql[i], or len(sql) if none does.
func skipLineComment(sql string, i int) int {
	n := len(sql)
	for i += 2; i < n && sql[i] != '\n'; i++ {
	}
	return i
}

// skipBlockComment returns the index of the last byte of the /* */
// comment starting at sql[i], or len(sql)-1 if it is unterminated.
func skipBlockComment(sql string, i int) int {
	n := len(sql)
	// Block comments nest in PostgreSQL.
	level := 1
	for i += 2; i < n && level > 0; i++ {
		switch {
		case sql[i] == '*' && i+1 < n && sql[i+1] == '/':
			level--
			i++
		case sql[i] == '/' && i+1 < n && sql[i+1] == '*':
			level++
			i++
		}
	}
	return i - 1
}

// readParam reads the parameter $n at sql[i], a $ followed by a digit: it
// returns n (which stops growing past 1<<20) and the index of its last
// digit.
func readParam(sql string, i int) (v, last int) {
	n := len(sql)
	j := i + 1
	for ; j < n && sql[j] >= '0' && sql[j] <= '9'; j++ {
		if v < 1<<20 {
			v = v*10 + int(sql[j]-'0')
		}
	}
	return v, j - 1
}

// skipDollarQuote reports whether the $ at sql[i] opens a dollar quote:
// $tag$ with tag empty or an identifier without $. If it does, it returns
// the index of the last byte of the closing $tag$, or -1 if the string
// is unterminated.
func skipDollarQuote(sql string, i int) (end int, quoted bool) {
	n := len(sql)
	j := i + 1
	if j < n && identStart(sql[j]) {
		for j < n && identByte(sql[j]) && sql[j] != '$' {
			j++
		}
	}
	if j >= n || sql[j] != '$' {
		return 0, false
	}
	tag := sql[i : j+1]
	end = indexFrom(sql, tag, j+1)
	if end < 0 {
		return -1, true
	}
	return end + len(tag) - 1, true
}

// skipWord returns the index of the last byte of the word (keyword or
// identifier) starting at sql[i], or, when a quote follows it (B'..',
// X'..', N'..', U&'..' prefixes and typed literals such as date '...'),
// of the standard string it starts.
func skipWord(sql string, i int) int {
	n := len(sql)
	j := i + 1
	for j < n && identByte(sql[j]) {
		j++
	}
	if j < n && sql[j] == '\'' {
		// A standard string follows.
		j = skipQuoted(sql, j, false) + 1
	}
	return j - 1
}

// skipQuoted returns the index of the quote that closes the string literal
// opening at sql[i], or len(sql) if it is unterminated. esc enables
// backslash escapes (E'...').
func skipQuoted(sql string, i int, esc bool) int {
	n := len(sql)
	for i++; i < n; i++ {
		switch sql[i] {
		case '\\':
			if esc {
				i++
			}
		case '\'':
			if i+1 < n && sql[i+1] == '\'' {
				i++
				continue
			}
			return i
		}
	}
	return n
}

func indexFrom(s, sub string, from int) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i] == sub[0] && s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// LimitError is returned for a text over one of the caps checked before
// parsing (MaxQueryBytes, MaxNestingDepth, MaxTokens).
type LimitError struct {
	What         string
	Value, Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s %d is over the limit of %d", e.What, e.Value, e.Limit)
}

// Reason says what the cap is, for a passthrough's reason.
func (e *LimitError) Reason() string {
	switch e.What {
	case "query length in bytes":
		return fmt.Sprintf("query is %d bytes, over the %d-byte limit", e.Value, e.Limit)
	case "nesting depth":
		return fmt.Sprintf("query nests parentheses deeper than %d", e.Limit)
	}
	return fmt.Sprintf("query has more than %d operators and words", e.Limit)
}

// CheckLimits checks sql against the caps on its size, nesting and
// tokens: the parser must never see what could exhaust its stack.
func CheckLimits(sql string) *LimitError {
	if len(sql) > MaxQueryBytes {
		return &LimitError{What: "query length in bytes", Value: len(sql), Limit: MaxQueryBytes}
	}
	st := Scan(sql, MaxNestingDepth, MaxTokens, false)
	if st.Depth > MaxNestingDepth {
		return &LimitError{What: "nesting depth", Value: st.Depth, Limit: MaxNestingDepth}
	}
	if st.tokens > MaxTokens {
		return &LimitError{What: "operator and word count", Value: st.tokens, Limit: MaxTokens}
	}
	return nil
}
