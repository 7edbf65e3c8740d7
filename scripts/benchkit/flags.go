package benchkit

import (
	"flag"
	"fmt"
	"os"
)

// EventFlags defines the flags of the generated events table's size:
// -rows (rowsHelp, rows by default), -days and -users.
func EventFlags(rows *int64, days *int, users *int64, defaultRows int64, rowsHelp string) {
	flag.Int64Var(rows, "rows", defaultRows, rowsHelp)
	flag.IntVar(days, "days", 90, "days the events span, from 2026-01-01")
	flag.Int64Var(users, "users", 2_000_000, "possible distinct users")
}

// DSNFlag defines -dsn, a database to run in instead of a throwaway
// cluster; made says what the benchmark makes in it.
func DSNFlag(dsn *string, made string) {
	flag.StringVar(dsn, "dsn", "", "use this database (with the hll extension) instead of a throwaway cluster; "+made)
}

// KeepFlag defines -keep, the directory a throwaway cluster is kept in;
// reuse says what the next run reuses of it.
func KeepFlag(keep *string, reuse string) {
	flag.StringVar(keep, "keep", "", "keep the throwaway cluster in this directory"+reuse)
}

// ProxyFlag defines -proxy, the pgsketch-proxy binary.
func ProxyFlag(proxy *string) {
	flag.StringVar(proxy, "proxy", "bin/pgsketch-proxy", "the pgsketch-proxy binary")
}

// NeedProxy checks that the pgsketch-proxy binary is where -proxy says.
func NeedProxy(bin string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the proxy binary: %w (build it with go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy)", err)
	}
	return nil
}
