// Package refresh builds and refreshes rollup tables.
//
// A refresh first installs the rollup's change-capture triggers where they
// are missing (pgsketch.capture_prepare, committed on its own, so that every
// write the refresh does not see is logged). Then it runs in one
// transaction on one session (an upstream.Session). SQL in schema pgsketch
// (pgsketch.refresh_begin) takes the rollup's advisory lock, reconciles the
// captured relations (a full rebuild when the source changed in ways no
// trigger sees), deletes the change-log entries its snapshot sees, picks
// the buckets to rebuild (from the oldest logged one, never the bucket
// holding now()), deletes their rows and hands back a query; this
// package streams that query's rows out with COPY TO, sketches the values
// (xxhash64 of their canonical text, docs/design.md §2.2) into one HLL per bucket
// and dimension values, writes the rebuilt rows back with COPY FROM, and
// pgsketch.refresh_finish advances the watermark and version, re-syncs the
// grants and queues the pgsketch_rollups NOTIFY. Any failure, cancellation
// or crash before COMMIT leaves the rollup as it was.
//
// The data flow within a refresh:
//
//	COPY (read_sql) TO STDOUT (FORMAT binary) ─► copyReader (binary tuples, fields)
//	    ─► groups (sketch.HLL, partials) ─► COPY rollup FROM STDIN
//
// A rollup's levels (levels.go) are rebuilt in the same transaction, after
// its rows: pgsketch.level_begin hands back a query over the rollup table
// whose sketches are united rather than hashed (field form "sketch"), and
// the same pipeline writes the level's rows.
//
// Background (background.go) is the background refresher pgsketch-proxy
// serve and demo run: a round at start and every interval, refreshing the
// rollups its login's role owns (as PostgreSQL says at every round), its
// sessions under a short lock_timeout so that it gives way to the
// application, and saying once, in its log and its status, why it cannot
// refresh where it cannot.
//
// Verify and VerifyFirstSeen (verify.go, verifyfirst.go), behind `rollup
// verify`, recount buckets and first-seen keys exactly and compare them with
// the rollup's.
package refresh
