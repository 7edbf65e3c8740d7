package benchkit

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Run runs a benchmark with its options: run with a context that an
// interrupt or SIGTERM cancels (so that what it started is stopped and
// removed), then ends the program as Exit does.
func Run[O any](name string, o O, run func(context.Context, O) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	Exit(name, err)
}

// Exit ends the program with status 1 after printing err, after the
// program's name, when err is not nil; it returns otherwise.
func Exit(name string, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
