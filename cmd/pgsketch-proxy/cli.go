package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// A command is one subcommand of pgsketch-proxy.
type command struct {
	name    string
	summary string
	// run parses args with the flag set it builds through newFlags and does the work.
	run func(ctx context.Context, a *app, args []string) error
}

// app carries what every command shares: output streams and the logger
// (set up by newFlags once flags are parsed).
type app struct {
	stdout, stderr io.Writer
	log            *slog.Logger
	cmdPath        string
}

// errUsage marks an error in how the command was called (exit status 2).
var errUsage = errors.New("usage")

var commands []*command

func init() {
	commands = []*command{
		{name: "serve", summary: "accept PostgreSQL clients and relay them to the upstream server", run: runServe},
		{name: "migrate", summary: "create or upgrade (up), revert (down) or show (version) the pgsketch catalog", run: runMigrate},
		{name: "rollup", summary: "create, refresh, list, drop or verify sketch rollup tables", run: runRollup},
		{name: "demo", summary: "a throwaway PostgreSQL with a generated events table and its daily rollup, behind the proxy; Ctrl-C removes it", run: runDemo},
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second SIGINT/SIGTERM ends the process at once
	}()
	a := &app{stdout: stdout, stderr: stderr, log: slog.New(slog.DiscardHandler)}
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		printUsage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			a.cmdPath = "pgsketch-proxy " + c.name
			return exitCode(a, c.run(ctx, a, args[1:]))
		}
	}
	fmt.Fprintf(stderr, "pgsketch-proxy: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return 2
}

func exitCode(a *app, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(a.stderr, "%s: %v\n", a.cmdPath, err)
		return 2
	default:
		a.log.Error("failed", "command", a.cmdPath, "err", err)
		fmt.Fprintf(a.stderr, "%s: %v\n", a.cmdPath, err)
		return 1
	}
}

func isHelp(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "pgsketch-proxy: fast approximate COUNT(DISTINCT) for PostgreSQL\n\nUsage:\n  pgsketch-proxy <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'pgsketch-proxy <command> --help' for a command's flags.\n"+
		"Every flag can also be set in the environment: --log-level is PGSKETCH_LOG_LEVEL.\n")
}

// flags is a command's flag set with the flags every command has.
type flags struct {
	*flag.FlagSet
	a        *app
	logLevel string
	usage    string
}

// newFlags makes the flag set for a command. usage is the synopsis after the
// command path, e.g. "up|down|version [flags]".
func (a *app) newFlags(usage string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(a.cmdPath, flag.ContinueOnError), a: a, usage: usage}
	f.SetOutput(a.stderr)
	f.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.Usage = func() {
		out := f.Output()
		fmt.Fprintf(out, "Usage: %s %s\n\nFlags (each also read from the environment variable shown):\n", a.cmdPath, f.usage)
		var names []string
		f.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
		sort.Strings(names)
		for _, n := range names {
			fl := f.Lookup(n)
			def := ""
			if fl.DefValue != "" && fl.DefValue != "false" {
				def = fmt.Sprintf(" (default %q)", fl.DefValue)
			}
			fmt.Fprintf(out, "  --%s  [%s]\n      %s%s\n", n, envName(n), fl.Usage, def)
		}
	}
	return f
}

// envName is the environment variable that sets flag name: PGSKETCH_ + NAME.
func envName(name string) string {
	return "PGSKETCH_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parse applies PGSKETCH_* environment variables, then the command line
// (which wins), then sets up logging.
func (f *flags) parse(args []string) error {
	var envErr error
	f.VisitAll(func(fl *flag.Flag) {
		if v, ok := os.LookupEnv(envName(fl.Name)); ok && envErr == nil {
			if err := fl.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%w: %s=%q: %v", errUsage, envName(fl.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	log, err := newLogger(f.a.stderr, f.logLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	f.a.log = log
	return nil
}

// parseFlagsOnly is parse for a command line of flags alone: an argument
// left after them is a usage error.
func (f *flags) parseFlagsOnly(args []string) error {
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, f.Arg(0))
	}
	return nil
}

// newLogger logs text to a terminal and JSON to anything else.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if isTerminal(w) {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
