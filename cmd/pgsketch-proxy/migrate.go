package main

import (
	"context"
	"fmt"

	"github.com/pgsketch/pgsketch/migrations"
)

func runMigrate(_ context.Context, a *app, args []string) error {
	f := a.newFlags("up|down|version --dsn URL [flags]")
	dsn := f.String("dsn", "", "PostgreSQL connection string of the database to migrate (required)")
	steps := f.Int("steps", 1, "down: how many migrations to revert")
	all := f.Bool("all", false, "down: revert every migration, dropping schema pgsketch")
	if len(args) == 0 || isHelp(args[0]) {
		f.Usage()
		if len(args) == 0 {
			return fmt.Errorf("%w: missing up, down or version", errUsage)
		}
		return nil
	}
	action, rest := args[0], args[1:]
	if err := f.parseFlagsOnly(rest); err != nil {
		return err
	}
	if *dsn == "" {
		return fmt.Errorf("%w: --dsn (or PGSKETCH_DSN) is required", errUsage)
	}
	if action != "up" && action != "down" && action != "version" {
		return fmt.Errorf("%w: unknown action %q: want up, down or version", errUsage, action)
	}
	m, err := migrations.Open(*dsn, a.log)
	if err != nil {
		return err
	}
	defer m.Close()
	switch action {
	case "up":
		err = m.Up()
	case "down":
		n := *steps
		if *all {
			n = -1
		} else if n < 1 {
			return fmt.Errorf("%w: --steps must be at least 1", errUsage)
		}
		err = m.Down(n)
	}
	if err != nil {
		return err
	}
	v, dirty, err := m.Version()
	if err != nil {
		return err
	}
	state := "clean"
	if dirty {
		state = "dirty: the last migration failed half-way; fix the database, then rerun"
	}
	fmt.Fprintf(a.stdout, "catalog version %d of %d (%s)\n", v, migrations.Latest(), state)
	return nil
}
