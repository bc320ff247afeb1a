package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/cgreaper/reaper/internal/guard"
)

// runGuard is a guard's life (reaper serve, reaper run, once their command line is checked): it
// starts the server, this program again with the same arguments, forwards every signal that would
// end it (and reaper run's job's) to it, cleans up whatever the server left (see guard.Run), logs
// what it did, and exits with the server's status; with crashed, if non-zero, when the server died
// of a signal (reaper run: the job's own status is unknown then). reaper run's server gets a process
// group of its own in the guard's session, as its job may need the session's terminal; reaper
// serve's a session.
func runGuard(command string, crashed int, args []string, e env) int {
	log := earlyLogger(e.stderr, args, e.getenv).With("guard", os.Getpid())
	opts := guard.Options{
		Argv:    append([]string{os.Args[0], command}, args...),
		Signals: slices.Concat(shutdownSignals, ignoredSignals),
		Logger:  log,
	}
	if command == "run" {
		opts.Setpgid = true
		opts.Signals = append(opts.Signals, runSignals...)
	} else {
		opts.Setsid = true
	}
	res, err := guard.Run(opts)
	if err != nil {
		fmt.Fprintf(e.stderr, "reaper %s: %v\n", command, err)
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
	if res.Signal != 0 && crashed != 0 {
		code = crashed
	}
	return e.exit.now(code)
}
