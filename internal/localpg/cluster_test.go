package localpg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestStartRemove(t *testing.T) {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.Port), 5*time.Second)
	if err != nil {
		c.Remove()
		t.Fatalf("server not listening: %v", err)
	}
	conn.Close()
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s still there (stat: %v)", c.Dir, err)
	}
	if err := c.Remove(); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

// TestWatchdogRemovesClusterOfKilledOwner starts a cluster in a child process,
// kills the child with SIGKILL, and expects the watchdog to stop the server
// and remove the directory.
func TestWatchdogRemovesClusterOfKilledOwner(t *testing.T) {
	if os.Getenv("LOCALPG_CHILD") == "1" {
		c, err := Start(context.Background(), Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("cluster", c.Dir, c.Port)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogRemovesClusterOfKilledOwner$")
	cmd.Env = append(os.Environ(), "LOCALPG_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	var port int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "cluster ") {
			fmt.Sscanf(l, "cluster %s %d", &dir, &port)
			break
		} else if strings.HasPrefix(l, "error") {
			t.Fatal(l)
		}
	}
	if dir == "" {
		cmd.Process.Kill()
		t.Fatal("child printed no cluster")
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		conn, dialErr := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if dialErr == nil {
			conn.Close()
		}
		if os.IsNotExist(statErr) && dialErr != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after its owner died: directory stat %v, server dial %v", statErr, dialErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestFindBinDirMessage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("PGSKETCH_PG_BINDIR", t.TempDir())
	old := debianBinGlob
	debianBinGlob = t.TempDir() + "/*/bin"
	defer func() { debianBinGlob = old }()
	_, err := FindBinDir()
	if !errors.Is(err, ErrNoBinaries) || !strings.Contains(err.Error(), "postgresql-15-hll") {
		t.Fatalf("want ErrNoBinaries saying what to install, got %v", err)
	}
}

// TestHBA starts a cluster whose pg_hba.conf lets the superuser in and rejects
// every other role over TCP, and checks that both lines take effect.
func TestHBA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{HBA: []string{
		"host all postgres 127.0.0.1/32 trust",
		"host all all 127.0.0.1/32 reject",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	admin, err := pgconn.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("superuser refused by the HBA lines that trust it: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE ROLE bob LOGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(c.URL("postgres"))
	u.User = url.User("bob")
	_, err = pgconn.Connect(ctx, u.String())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28000" || !strings.Contains(pgErr.Message, "pg_hba.conf rejects connection") {
		t.Fatalf("bob over TCP: want the pg_hba.conf rejection (28000), got %v", err)
	}
}

// TestServerHome: the server's HOME is its own user's home directory, not
// the caller's: as root the server runs as postgres, and libpq in it (an
// extension connecting to other servers, such as Citus) fails on a home it
// may not read when it looks for client certificates there.
func TestServerHome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	conn, err := pgconn.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	file := filepath.Join(c.Dir, "home.txt")
	// The program reads its input: one that exits first breaks the pipe
	// COPY writes the row into, which fails the statement.
	if _, err := conn.Exec(ctx, `COPY (SELECT 1) TO PROGRAM 'cat > /dev/null; printf %s "$HOME" > `+file+`'`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := os.Getenv("HOME")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		want = u.HomeDir
	}
	if string(got) != want {
		t.Fatalf("the server's HOME is %q, want %q", got, want)
	}
}
