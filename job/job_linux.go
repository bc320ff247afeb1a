package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/reaper"
	"golang.org/x/sys/unix"
)

// Exit statuses of the job's own making; the rest are the command's (128+n for a death by signal n),
// as with GNU timeout.
const (
	ExitLeftovers     = 123 // Config.FailOnLeftovers, and the command left processes running
	ExitTimedOut      = 124 // Config.Timeout ended the job
	ExitFailed        = 125 // reaper run itself failed
	ExitNotExecutable = 126 // the command was found but could not be executed
	ExitNotFound      = 127 // the command was not found
)

// ForwardedSignals are passed on to the job's process group; the caller delivers them on
// Config.Signals.
var ForwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// Config says what Run runs and how.
type Config struct {
	// Argv is the command and its arguments, run directly (no shell). Required.
	Argv []string
	// Options configures the Reaper the job's session runs in; its Grace is also the time the job
	// gets after a forwarded INT or TERM. Its Announce is the guard's, if there is one.
	Options reaper.Options
	// Timeout ends the whole job (SIGTERM, grace, kill) after this long; zero means no limit.
	Timeout time.Duration
	// Guard is this process's guard: the job is killed at once if the guard dies, takes the
	// terminal's foreground only from the guard's group, and a clean end is told to it. Nil is no
	// guard, and the foreground is taken only from this process's group.
	Guard Guard
	// Signals delivers the signals this process receives (see wait). Ignored reports those to drop
	// (the caller's own: SIGPIPE and such).
	Signals <-chan os.Signal
	Ignored func(os.Signal) bool
	// FailOnLeftovers makes a command that succeeded but left processes running exit ExitLeftovers.
	FailOnLeftovers bool
	Verbose         bool         // say on Stderr how processes are contained
	Stderr          io.Writer    // reaper run's own messages
	Log             *slog.Logger // what the Reaper does; nil discards
}

// Guard is what a job needs of the process that guards it (internal/guard's Link).
type Guard interface {
	// Group returns the guard's process group, -1 where it cannot be read.
	Group() int
	// Gone reports whether the guard has died or is dying, as far as can be seen now.
	Gone() bool
	// WaitGone blocks until the guard has died or ctx is done, and reports whether it died.
	WaitGone(ctx context.Context) bool
	// Clean tells the guard, as the last word, that the job's Reaper has closed cleanly.
	Clean() error
}

// Report is what happened to a job; `reaper run --report` writes it as JSON. Leftovers is nil when
// the job did not start.
type Report struct {
	Command []string `json:"command"`
	// ExitStatus is the status reaper run exits with: the command's exit code, or ExitLeftovers,
	// ExitTimedOut or one of reaper run's own failures.
	ExitStatus int `json:"exit_status"`
	// ExitCode is the command's own exit code (128+N for a death by signal N), once it ended; nil
	// when it never started.
	ExitCode    *int          `json:"exit_code,omitempty"`
	TimedOut    bool          `json:"timed_out"`
	Leftovers   []reaper.Proc `json:"leftovers"`
	Duration    float64       `json:"duration_seconds"`
	Containment string        `json:"containment"`
	PIDNS       bool          `json:"pid_namespace"`
	Error       string        `json:"error,omitempty"`
}

// Run runs the job to its end in a session of a new Reaper, tears down whatever it left, and reports
// how it went. The command's standard files are this process's; on a terminal whose foreground is
// the guard's group it runs in the foreground, and the terminal is given back at the end.
func Run(c Config) Report {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Guard == nil {
		c.Guard = guard.Link{} // no guard: this process stands in for it, and never goes
	}
	j := &run{c: c, start: time.Now(), rep: Report{Command: c.Argv}}
	if j.rep.ExitStatus = j.setUp(); j.rep.ExitStatus != 0 {
		return j.rep
	}
	if j.rep.ExitStatus = j.wait(); j.rep.ExitStatus == 0 && len(j.rep.Leftovers) > 0 && c.FailOnLeftovers {
		j.rep.ExitStatus = ExitLeftovers
	}
	j.finish()
	return j.rep
}

// run is one job's run.
type run struct {
	c     Config
	start time.Time
	r     *reaper.Reaper
	s     *reaper.Session
	job   *reaper.Job
	term  terminal // the terminal the job has the foreground of, if fg
	fg    bool
	rep   Report
}

// setUp creates the Reaper, the session and the job, and returns a non-zero status on failure.
func (j *run) setUp() int {
	opts := j.c.Options
	if opts.Logger == nil {
		opts.Logger = j.c.Log
	}
	r, err := reaper.New(opts)
	if err != nil {
		fmt.Fprintf(j.c.Stderr, "reaper run: %v\n", err)
		j.rep.Error = err.Error()
		return ExitFailed
	}
	j.r = r
	ci := r.Containment()
	j.rep.Containment, j.rep.PIDNS = ci.Mode.String(), ci.PIDNamespace.On
	if j.c.Verbose {
		fmt.Fprintf(j.c.Stderr, "reaper run: containment %s; pid namespace %s\n", ci, ci.PIDNamespace)
	}
	wd, _ := os.Getwd()
	j.s, err = r.NewSession("run", reaper.SessionOptions{WorkDir: wd})
	if err == nil {
		j.term, j.fg = foregroundTerminal(os.Stdin, j.c.Guard.Group())
		j.job, err = j.s.Exec(reaper.ExecOptions{Argv: j.c.Argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Foreground: j.fg})
	}
	if err != nil {
		j.rep.Error = err.Error()
		j.r.Close(context.Background())
		return j.execFailed(err)
	}
	return 0
}

// execFailed says why the command could not start, as a shell would for a program it cannot run,
// and returns the exit status that says it.
func (j *run) execFailed(err error) int {
	name := j.c.Argv[0]
	var errno syscall.Errno
	switch {
	case errors.Is(err, reaper.ErrNotFound):
		fmt.Fprintf(j.c.Stderr, "reaper run: %s: command not found\n", name)
		return ExitNotFound
	case errors.Is(err, reaper.ErrNotExecutable) && errors.As(err, &errno):
		fmt.Fprintf(j.c.Stderr, "reaper run: %s: %v\n", name, errno)
		return ExitNotExecutable
	case errors.Is(err, reaper.ErrNotExecutable):
		fmt.Fprintf(j.c.Stderr, "reaper run: %s: cannot execute\n", name)
		return ExitNotExecutable
	}
	fmt.Fprintf(j.c.Stderr, "reaper run: %v\n", err)
	return ExitFailed
}

// wait runs the job to its end and tears the session down, and returns the job's exit status.
// ForwardedSignals are passed on to the job's process group; after INT or TERM (or another shutdown
// signal, passed on as TERM) the job has the grace period to exit before everything is killed; a
// second one kills at once, and so does the guard's death. Config.Timeout ends the job with the
// grace period.
func (j *run) wait() int {
	done := make(chan int, 1)
	waitCtx, stopWaiting := context.WithCancel(context.Background())
	go func() {
		code, _ := j.job.Wait(waitCtx)
		done <- code
	}()
	var timeout, graceEnd <-chan time.Time
	if j.c.Timeout > 0 {
		t := time.NewTimer(j.c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	hurry, cut := context.WithCancel(context.Background()) // cancelled: no grace period left
	defer cut()
	guardGone := make(chan struct{})
	watched := make(chan struct{})
	defer func() { <-watched }()
	defer stopWaiting()
	go func() {
		defer close(watched)
		if j.c.Guard.WaitGone(waitCtx) {
			cut() // also for a teardown under way: the job may have ended already
			close(guardGone)
		}
	}()
	end := func() { // kill everything now
		cut()
		j.rep.Leftovers = j.othersThanCommand()
		j.s.Close(hurry)
	}
	terms := 0
	for {
		select {
		case code := <-done:
			j.rep.ExitCode = &code
			j.closeSession(hurry)
			return code
		case <-timeout:
			fmt.Fprintf(j.c.Stderr, "reaper run: timed out after %v\n", j.c.Timeout)
			j.rep.TimedOut = true
			j.rep.Leftovers = j.othersThanCommand()
			j.s.Close(hurry) // SIGTERM, grace, kill: the whole job
			code := <-done
			j.rep.ExitCode = &code
			return ExitTimedOut
		case <-graceEnd:
			graceEnd = nil
			end()
		case <-guardGone:
			guardGone = nil
			fmt.Fprintln(j.c.Stderr, "reaper run: its guard process was killed: killing the job")
			end()
		case sig := <-j.c.Signals:
			s := sig.(syscall.Signal)
			switch {
			case j.c.Ignored != nil && j.c.Ignored(s):
				continue
			case s == guard.Signal && j.c.Guard.Gone():
				continue // the guard watcher above ends the job
			case !slices.Contains(ForwardedSignals, os.Signal(s)):
				s = syscall.SIGTERM // a shutdown signal the job would not expect: ask it to end
			}
			if err := j.job.Signal(s); err != nil {
				j.c.Log.Warn("forwarding a signal failed", "signal", s.String(), "error", err)
			}
			if s != syscall.SIGINT && s != syscall.SIGTERM {
				continue
			}
			terms++
			if terms == 1 && j.r.Limits().Grace > 0 {
				t := time.NewTimer(j.r.Limits().Grace)
				defer t.Stop()
				graceEnd = t.C
				continue
			}
			end()
		}
	}
}

// othersThanCommand returns the session's processes but the command itself: what it started, which
// is what a summary names as left over when the job is ended before the command exited.
func (j *run) othersThanCommand() []reaper.Proc {
	var out []reaper.Proc
	for _, p := range j.s.Processes() {
		if p.Pid != j.job.Pid() {
			out = append(out, p)
		}
	}
	return out
}

// closeSession tears down what the job left, once it has exited: what is alive now is named in the
// report, then it gets SIGTERM, the grace period and SIGKILL. hurry cuts the grace period short.
func (j *run) closeSession(hurry context.Context) {
	if j.rep.Leftovers == nil {
		j.rep.Leftovers = j.s.Processes()
	}
	if _, err := j.s.Close(hurry); err != nil {
		j.c.Log.Warn("tearing down the job's session", "error", err)
	}
}

// finish gives the terminal back and closes the Reaper. Closed cleanly, it tells the guard, which
// then has nothing to clean up (see Guard.Clean).
func (j *run) finish() {
	if j.fg {
		if err := j.term.restore(); err != nil {
			j.c.Log.Warn("giving the terminal back", "error", err)
		}
	}
	if err := j.r.Close(context.Background()); err != nil {
		j.c.Log.Warn("closing the reaper", "error", err)
	} else if err := j.c.Guard.Clean(); err != nil {
		j.c.Log.Warn("the guard will clean up after all", "error", err)
	}
	j.rep.Duration = time.Since(j.start).Seconds()
}

// terminal is a terminal the job was given the foreground of, and the process group to give it back
// to.
type terminal struct {
	fd   int
	pgrp int
}

// foregroundTerminal returns the terminal on f, if f is one whose foreground process group is pgrp
// (the group reaper run was started in): the job may then take the foreground, as a shell's job does.
// It reports false where f is no terminal, or reaper runs in the background of one.
func foregroundTerminal(f *os.File, pgrp int) (terminal, bool) {
	fd := int(f.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg != pgrp {
		return terminal{}, false
	}
	return terminal{fd: fd, pgrp: pgrp}, true
}

// restore gives the terminal's foreground back to the process group that had it. This process is in
// a background group of the terminal then, so the kernel would stop it with SIGTTOU, and with tostop
// for a write to it too: restore ignores SIGTTOU first, for the rest of the process's life (it is about
// to exit).
func (t terminal) restore() error {
	signal.Ignore(syscall.SIGTTOU)
	if err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp); err != nil && !errors.Is(err, unix.ENOTTY) {
		return fmt.Errorf("give the terminal back to process group %d: %w", t.pgrp, err)
	}
	return nil
}
