package proxy

import (
	"testing"

	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// FuzzInterceptCommand: the handler intercepts every statement the
// rewriter recognizes as a command (a refresh call, SHOW of a setting),
// never panicking on any text.
func FuzzInterceptCommand(f *testing.F) {
	f.Add("SELECT pgsketch.refresh_rollup('daily', from_time => '2026-01-01')")
	f.Add("select pgsketch.refresh_rollup('a''b', true)")
	f.Add("SHOW pgsketch.topk")
	f.Fuzz(func(t *testing.T, sql string) {
		_, ok := syntax.ParseCommand(sql)
		if got := New(nil).Intercept([]byte(sql)); ok && !got {
			t.Fatalf("Intercept = %v, ParseCommand ok = %v", got, ok)
		}
	})
}
