// Package migrations holds pgsketch's numbered schema changes and applies them.
//
// The files NNNNNN_name.up.sql / NNNNNN_name.down.sql are golang-migrate
// migrations, embedded in the binary. They create and upgrade schema
// pgsketch: the rollup catalog (docs/design.md §2.6). golang-migrate records the
// applied version in the table pgsketch_schema_migrations in the connecting
// role's current schema (outside pgsketch, so that migrating all the way down
// can drop the schema), and serialises concurrent runs with an advisory lock.
package migrations
