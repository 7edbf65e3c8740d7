package benchkit

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/internal/localpg"
	"github.com/pgsketch/pgsketch/migrations"
)

// Settings are the throwaway cluster's settings every benchmark starts
// from (internal/localpg adds its test settings: fsync off and the rest).
func Settings() map[string]string {
	return map[string]string{"shared_buffers": "1GB", "max_wal_size": "8GB", "checkpoint_timeout": "30min"}
}

// Cluster starts a throwaway PostgreSQL 15 cluster with settings (in
// keep, kept after stop, when keep is not empty) and returns the URL of
// its postgres database and the function that stops it (and removes it
// unless kept).
func Cluster(ctx context.Context, keep string, settings map[string]string) (dsn string, stop func(), err error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := localpg.Start(ctx, localpg.Options{Dir: keep, Keep: keep != "", Logger: log, Settings: settings})
	if err != nil {
		return "", nil, err
	}
	return c.URL("postgres"), func() { c.Remove() }, nil
}

// Prepare makes database dsn ready for pgsketch: the hll extension and
// the pgsketch catalog, migrated up.
func Prepare(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS hll"); err != nil {
		return fmt.Errorf("the hll extension is needed: %w", err)
	}
	m, err := migrations.Open(dsn, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Up()
}

// Median is the median of ds (the mean of the two middle values for an
// even count), 0 for none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// MedianFloat is Median of floats, 0 for none.
func MedianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// Ms prints d in milliseconds (seconds from one second on), with three
// significant digits or so.
func Ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000)
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	default:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "? ? ?"
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times
// (100 on Linux's supported architectures).
const clockTicks = 100

// ProcCPU is the CPU time (user and system) process pid has used, read
// from /proc/PID/stat; 0 when it cannot be read.
func ProcCPU(pid uint32) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0
	}
	f := strings.Fields(s[i+2:]) // from field 3, state
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+st) * time.Second / clockTicks
}
