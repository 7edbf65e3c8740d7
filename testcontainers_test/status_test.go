package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoProc is a running `pgsketch-proxy demo`.
type demoProc struct {
	proxyURL, directURL, statusURL string
	printed                        string // stdout up to the Ctrl-C line
	cmd                            *exec.Cmd
	stderr                         *lockedBuffer
	exited                         chan error // the process's exit, once
}

// startDemo runs the demo with a small table (and flags) and returns once it printed
// everything; it is stopped with SIGINT when the test ends.
func startDemo(t *testing.T, rows string, flags ...string) *demoProc {
	t.Helper()
	args := append([]string{"demo", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--rows", rows}, flags...)
	cmd := exec.Command(binary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{} // written by exec's copier while the test reads it
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &demoProc{cmd: cmd, stderr: stderr, exited: make(chan error, 1)}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
	})
	var printed strings.Builder
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		d.exited <- cmd.Wait() // after stdout is read, as exec requires
	}()
	urlRE := regexp.MustCompile(`psql '([^']+)'`)
	deadline := time.After(2 * time.Minute)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo exited early; stdout:\n%s\nstderr:\n%s", printed.String(), stderr.String())
			}
			printed.WriteString(l + "\n")
			if m := urlRE.FindStringSubmatch(l); m != nil {
				if d.proxyURL == "" {
					d.proxyURL = m[1]
				} else {
					d.directURL = m[1]
				}
			}
			if i := strings.Index(l, "http://"); i >= 0 && strings.HasPrefix(l, "Status page") {
				d.statusURL = strings.TrimSpace(l[i:])
			}
			done = strings.HasPrefix(l, "Press Ctrl-C")
		case <-deadline:
			t.Fatalf("demo not ready in 2 minutes; stderr:\n%s", stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	d.printed = printed.String()
	if d.proxyURL == "" || d.directURL == "" || d.statusURL == "" {
		t.Fatalf("demo printed no proxy, direct or status URL:\n%s", d.printed)
	}
	return d
}

// chromium runs headless Chromium (Debian package chromium) with args.
func chromium(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}, args...)
	out, err := exec.CommandContext(ctx, "chromium", all...).Output()
	if err != nil {
		t.Fatalf("chromium %v (the Debian package chromium): %v", args, err)
	}
	return string(out)
}

// TestStatusPage loads the demo's status page in headless Chromium: it lists
// the demo rollup, and after a query answered from it (both exactly and
// approximately) shows that query and an error sample. A screenshot is kept
// in testcontainers_test/artifacts/status-page.png.
func TestStatusPage(t *testing.T) {
	t.Parallel()
	d := startDemo(t, "20000")
	dom := chromium(t, "--dump-dom", d.statusURL)
	if !strings.Contains(dom, `<tr class="rollup"><td><b>events_daily</b>`) || !strings.Contains(dom, "public.events") {
		t.Fatalf("status page does not list the demo rollup:\n%s", dom)
	}
	// The side-by-side demo query: exact and approximate in one.
	q := regexp.MustCompile(`(?s)-- side by side[^\n]*\n(SELECT .*?;)`).FindStringSubmatch(d.printed)
	if q == nil {
		t.Fatalf("no side-by-side query in:\n%s", d.printed)
	}
	if _, errOut, code := psql(t, d.proxyURL, "-c", q[1]); code != 0 {
		t.Fatalf("side-by-side query: exit %d: %s", code, errOut)
	}
	dom = chromium(t, "--dump-dom", d.statusURL)
	if !strings.Contains(dom, `<tr class="rewritten">`) || !strings.Contains(dom, "approx_count_distinct(user_id) AS approx") {
		t.Errorf("status page does not show the rewritten query:\n%s", dom)
	}
	if !strings.Contains(dom, `class="sample"`) {
		t.Errorf("status page shows no error sample:\n%s", dom)
	}
	dir, err := filepath.Abs("artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "status-page.png")
	os.Remove(shot)
	chromium(t, "--hide-scrollbars", "--window-size=1280,1200", "--screenshot="+shot, d.statusURL)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
