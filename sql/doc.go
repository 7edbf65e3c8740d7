// Package sql holds the SQL objects users call inside PostgreSQL: the
// functions and views of schema pgsketch (pgsketch.create_rollup,
// pgsketch.drop_rollup, the pgsketch.rollups view, ...), one .sql file per
// topic, so they can be read and reviewed as SQL.
//
// The files are not run on their own: a numbered migration includes them
// with a psql-style "\ir ../sql/NAME.sql" line (package migrations expands
// it), so the migration history decides when they are installed. A file's
// objects must be created with plain CREATE (not CREATE OR REPLACE) and a
// later change to them needs a new migration and a new file, so that an
// applied migration never changes meaning.
package sql

import "embed"

// Files are the embedded .sql files.
//
//go:embed *.sql
var Files embed.FS
