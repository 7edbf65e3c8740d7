package localpg

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries reports that no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")

// InstallHint names what to install for a local cluster with the hll extension.
const InstallHint = "install the Debian packages postgresql-15 and postgresql-15-hll " +
	"(as root: apt-get install -y postgresql-15 postgresql-15-hll)"

// debianBinGlob is where Debian's postgresql-NN packages put the server binaries.
var debianBinGlob = "/usr/lib/postgresql/*/bin"

// FindBinDir returns the directory holding initdb, pg_ctl and postgres. It
// tries $PGSKETCH_PG_BINDIR, then `pg_config --bindir`, then the newest
// /usr/lib/postgresql/*/bin, preferring major version 15.
func FindBinDir() (string, error) {
	var tried []string
	if d := os.Getenv("PGSKETCH_PG_BINDIR"); d != "" {
		if hasServerBinaries(d) {
			return d, nil
		}
		tried = append(tried, d+" ($PGSKETCH_PG_BINDIR)")
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if hasServerBinaries(d) {
			return d, nil
		}
		tried = append(tried, d+" (pg_config --bindir)")
	}
	dirs, _ := filepath.Glob(debianBinGlob)
	sort.Slice(dirs, func(i, j int) bool { return rank(dirs[i]) > rank(dirs[j]) })
	for _, d := range dirs {
		if hasServerBinaries(d) {
			return d, nil
		}
	}
	tried = append(tried, debianBinGlob)
	return "", fmt.Errorf("%w (looked in %s): %s", ErrNoBinaries, strings.Join(tried, ", "), InstallHint)
}

// rank orders /usr/lib/postgresql/N/bin directories: 15 first, then newest.
func rank(dir string) int {
	v, err := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	if err != nil {
		return -1
	}
	if v == 15 {
		return 1 << 20
	}
	return v
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
