package migrations

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"

	pgsql "github.com/pgsketch/pgsketch/sql"
)

// includePrefix starts a line that includes a file of package sql, the way
// psql's \ir would from this directory: "\ir ../sql/rollups_v1.sql".
const includePrefix = `\ir ../sql/`

// expand returns the migration files with every include line replaced by
// the included file, so golang-migrate runs plain SQL. A missing file is an
// error, found by the tests before any database sees it.
func expand(migs, sqls fs.FS) (fs.FS, error) {
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(migs, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		b, err := fs.ReadFile(migs, e.Name())
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			name, ok := strings.CutPrefix(strings.TrimSpace(line), includePrefix)
			if !ok {
				buf.WriteString(line)
				buf.WriteByte('\n')
				continue
			}
			inc, err := fs.ReadFile(sqls, name)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: include %s: %w", e.Name(), n, name, err)
			}
			fmt.Fprintf(&buf, "-- begin %s\n%s\n-- end %s\n", name, inc, name)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out[e.Name()] = &fstest.MapFile{Data: buf.Bytes(), Mode: 0o444}
	}
	return out, nil
}

// source is the expanded migration files of this binary.
func source() (fs.FS, error) { return expand(files, pgsql.Files) }
