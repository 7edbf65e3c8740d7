package catalog

import "strings"

// QuoteIdent quotes s as a PostgreSQL identifier, always, doubling any
// embedded double quote. Identifiers in generated SQL are always quoted so
// that no name can change its meaning.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteLiteral quotes s as a PostgreSQL string literal (standard conforming
// strings), doubling embedded single quotes.
func QuoteLiteral(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}
