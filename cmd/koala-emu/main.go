package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/koala-emu/koala-emu/launch"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first Ctrl-C (or SIGTERM) ends the command gracefully: a run
	// writes its results so far, marks its unfinished jobs interrupted and
	// removes what it created. From then on the default handling is back,
	// so a second Ctrl-C ends the process at once (`koala-emu clean` then
	// removes what it left: its owner is gone).
	var finished atomic.Bool
	go func() {
		<-ctx.Done()
		stop()
		if !finished.Load() {
			fmt.Fprintln(os.Stderr, "interrupted: writing the results so far and cleaning up (Ctrl-C again to force)")
		}
	}()
	code := execute(ctx, os.Args[1:], newApp(os.Stdout, os.Stderr))
	finished.Store(true)
	stop()
	os.Exit(code)
}

// Exit codes of the binary.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed (a failed run, an invalid scenario, ...)
	exitUsage = 2 // the command line was wrong: unknown command or flag, wrong arguments
)

// execute runs one command line and returns the exit code. Errors go to the
// app's stderr: a usage error with a pointer to the command's help.
func execute(ctx context.Context, args []string, a *app) int {
	root := newRoot(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(a.stderr, "%s: %v\nsee '%s --help'\n", binaryName, err, cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintf(a.stderr, "%s: %v\n", binaryName, err)
	return exitError
}

// usageError is a wrong command line, as opposed to a command that ran and
// failed.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// app holds what the commands write to and the parts a test replaces: the
// backends, the clean operation and calibrate's probe of the machine.
type app struct {
	stdout, stderr io.Writer
	backends       []launch.Backend
	clean          cleanFunc
	probe          func(ctx context.Context, log io.Writer) []ptimer.Stalls
}

// newApp is the app of the binary: the real backends, clean and probe.
func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, backends: launch.Backends(), clean: launch.Clean, probe: probeMachine}
}
