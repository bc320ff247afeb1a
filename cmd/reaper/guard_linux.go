package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/cgreaper/reaper/internal/guard"
)

// guardSpec says how a command runs under its guard.
type guardSpec struct {
	command string
	// crashed, if non-zero, is the exit status when the server dies of a signal (reaper run: the
	// job's own status is unknown then); otherwise 128+n for signal n.
	crashed int
	exit    exitFunc
}

// runGuard is a guard's life (reaper serve, reaper run, once their command line is checked): it
// starts the server, this program again with the same arguments, forwards every signal that would
// end it (and reaper run's job's) to it, cleans up whatever the server left (see guard.Run), logs
// what it did, and exits with the server's status. reaper run's server gets a process group of its
// own in the guard's session, as its job may need the session's terminal; reaper serve's a session.
func runGuard(spec guardSpec, args []string, getenv func(string) string, stderr io.Writer) int {
	log := earlyLogger(stderr, args, getenv).With("guard", os.Getpid())
	opts := guard.Options{
		Argv:    append([]string{os.Args[0], spec.command}, args...),
		Signals: slices.Concat(shutdownSignals, ignoredSignals),
		Logger:  log,
	}
	if spec.command == "run" {
		opts.Setpgid = true
		opts.Signals = append(opts.Signals, runSignals...)
	} else {
		opts.Setsid = true
	}
	res, err := guard.Run(opts)
	if err != nil {
		fmt.Fprintf(stderr, "reaper %s: %v\n", spec.command, err)
		return 1
	}
	if res.Forwarded != nil {
		log.Warn("forwarding a signal failed", "error", res.Forwarded)
	}
	if res.Signal != 0 || len(res.Killed) > 0 || res.Err != nil {
		attrs := []any{"server", res.Pid, "status", res.Code, "killed", len(res.Killed)}
		if res.Signal != 0 {
			attrs = append(attrs, "signal", res.Signal.String())
		}
		if len(res.Killed) > 0 {
			attrs = append(attrs, "processes", res.Killed)
		}
		if res.Instance.Slice != "" {
			attrs = append(attrs, "slice", res.Instance.Slice)
		}
		if res.Err != nil {
			attrs = append(attrs, "error", res.Err)
		}
		log.Warn("the server ended without cleaning up; the guard did", attrs...)
	}
	code := res.Code
	if res.Signal != 0 && spec.crashed != 0 {
		code = spec.crashed
	}
	return spec.exit.now(code)
}
