package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure a cluster. The zero value is a throwaway cluster in a new
// temporary directory on a free port.
type Options struct {
	// Dir is the cluster's directory. Empty means a new temporary directory.
	// A Dir that already holds a cluster made by localpg is reused.
	Dir string
	// Keep leaves Dir in place on Remove and disables the watchdog.
	Keep bool
	// Port to listen on; 0 picks a free one.
	Port int
	// Settings are extra server settings (postgresql.conf names).
	Settings map[string]string
	// HBA, when not empty, replaces pg_hba.conf with these lines (pg_hba.conf
	// syntax, one record per line) before the server starts. Empty keeps
	// initdb's file, which trusts every local and loopback connection. The
	// superuser connects over TCP (URL), so keep a line that lets it in, such
	// as "host all postgres 127.0.0.1/32 trust".
	HBA []string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Cluster is a running local PostgreSQL server.
type Cluster struct {
	Dir  string // cluster directory: data/, the socket and server.log
	Port int
	User string // database superuser

	bin      string
	cred     *syscall.Credential // nil when not root
	home     string              // the postgres user's home directory, with cred
	keep     bool
	log      *slog.Logger
	watchdog *os.Process

	mu      sync.Mutex
	removed bool
}

// Superuser is the database superuser of every cluster localpg makes.
const Superuser = "postgres"

// testSettings make a throwaway server fast; durability is not needed.
var defaultSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "200",
	"listen_addresses":   "127.0.0.1",
}

// Start makes (or reuses) a cluster and starts its server. The caller must
// call Remove.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{Dir: opts.Dir, Port: opts.Port, User: Superuser, bin: bin, keep: opts.Keep, log: log}
	if os.Geteuid() == 0 {
		if c.cred, c.home, err = postgresCredential(); err != nil {
			return nil, err
		}
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "pgsketch-pg-"); err != nil {
			return nil, fmt.Errorf("localpg: make cluster directory: %w", err)
		}
	} else if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("localpg: make cluster directory: %w", err)
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	if err := c.chown(c.Dir); err != nil {
		return nil, err
	}
	if c.Port == 0 {
		if c.Port, err = freePort(); err != nil {
			c.removeDir()
			return nil, err
		}
	}
	if !c.keep {
		// From here on, a crash of this process must not leave the cluster behind.
		if err := c.startWatchdog(); err != nil {
			c.removeDir()
			return nil, err
		}
	}
	if err := c.initdb(ctx); err != nil {
		c.Remove()
		return nil, err
	}
	if len(opts.HBA) > 0 {
		if err := c.writeHBA(opts.HBA); err != nil {
			c.Remove()
			return nil, err
		}
	}
	if err := c.start(ctx, opts.Settings); err != nil {
		c.Remove()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }
func (c *Cluster) logFile() string { return filepath.Join(c.Dir, "server.log") }

// URL returns a connection URL for database db as the superuser.
func (c *Cluster) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(c.User),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); err == nil {
		c.log.Info("reusing PostgreSQL cluster", "dir", c.Dir)
		return nil
	}
	c.log.Info("creating PostgreSQL cluster", "dir", c.Dir, "bin", c.bin)
	_, err := c.run(ctx, "initdb", "-D", c.dataDir(), "-U", c.User, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	return err
}

// writeHBA replaces the cluster's pg_hba.conf with lines.
func (c *Cluster) writeHBA(lines []string) error {
	path := filepath.Join(c.dataDir(), "pg_hba.conf")
	text := "# written by localpg (Options.HBA)\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return fmt.Errorf("localpg: write pg_hba.conf: %w", err)
	}
	return c.chown(path)
}

func (c *Cluster) start(ctx context.Context, extra map[string]string) error {
	settings := map[string]string{}
	for k, v := range defaultSettings {
		settings[k] = v
	}
	for k, v := range extra {
		settings[k] = v
	}
	settings["port"] = strconv.Itoa(c.Port)
	settings["unix_socket_directories"] = c.Dir
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var o strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&o, " -c %s=%s", k, shellQuote(settings[k]))
	}
	c.log.Info("starting PostgreSQL", "port", c.Port)
	_, err := c.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", c.dataDir(), "-l", c.logFile(), "-o", o.String())
	if err != nil {
		if b, rerr := os.ReadFile(c.logFile()); rerr == nil {
			err = fmt.Errorf("%w; server log:\n%s", err, tail(b, 2000))
		}
	}
	return err
}

// Stop stops the server, leaving the directory.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", c.dataDir())
	return err
}

// Remove stops the server and removes the cluster directory (unless Keep).
// It is safe to call more than once.
func (c *Cluster) Remove() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return nil
	}
	c.removed = true
	var errs []error
	if _, err := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); err == nil {
		if err := c.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if !c.keep {
		if err := c.removeDir(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.watchdog != nil {
		c.watchdog.Kill()
		c.watchdog.Wait()
	}
	return errors.Join(errs...)
}

func (c *Cluster) removeDir() error {
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("localpg: remove %s: %w", c.Dir, err)
	}
	c.log.Info("removed PostgreSQL cluster", "dir", c.Dir)
	return nil
}

// startWatchdog starts a detached shell that waits for this process to exit
// and then stops the server and removes the directory. It is killed by Remove.
func (c *Cluster) startWatchdog() error {
	script := `while [ -d /proc/` + strconv.Itoa(os.Getpid()) + ` ]; do sleep 1; done
` + shellQuote(filepath.Join(c.bin, "pg_ctl")) + ` stop -m immediate -D ` + shellQuote(c.dataDir()) + ` >/dev/null 2>&1
rm -rf ` + shellQuote(c.Dir)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: c.cred}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localpg: start watchdog: %w", err)
	}
	c.watchdog = cmd.Process
	return nil
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.home != "" {
		// The server runs as postgres: libpq in it (extensions that
		// connect to other servers, such as Citus) looks for client
		// certificates under $HOME/.postgresql, and fails on a home it
		// may not read.
		cmd.Env = append(cmd.Env, "HOME="+c.home)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("localpg: %s: %w: %s", name, err, tail(out.Bytes(), 2000))
	}
	return out.Bytes(), nil
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("localpg: give %s to the postgres user: %w", path, err)
	}
	return nil
}

func postgresCredential() (*syscall.Credential, string, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, "", fmt.Errorf("localpg: running as root, so the server must run as the OS user postgres, which does not exist (%w): %s", err, InstallHint)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, "", fmt.Errorf("localpg: bad uid/gid for user postgres: %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, u.HomeDir, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
