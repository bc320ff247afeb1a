package main

import (
	"bytes"
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

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/reaper"
)

// Exit statuses of reaper run's own making; the rest are the command's (128+n for a death by signal
// n), as with GNU timeout.
const (
	exitLeftovers     = 123 // --fail-on-leftovers, and the command left processes running
	exitTimedOut      = 124 // --timeout ended the job
	exitFailed        = 125 // reaper run itself failed
	exitNotExecutable = 126 // the command was found but could not be executed
	exitNotFound      = 127 // the command was not found
)

const runUsage = `Usage: reaper run [flags] -- COMMAND [ARGS...]

Runs COMMAND in a slice of its own and, when it exits, kills whatever it left running (SIGTERM, then
SIGKILL after --grace) before reaper exits with COMMAND's status, naming on stderr what it killed.
setsid children, double forks and nohup'ed daemons included: nothing the job started outlives it.
There is deliberately no way to keep leftovers alive. COMMAND's standard input, output and error are
its own; on a terminal it runs in the foreground, so Ctrl-C reaches it as it would without reaper.
If reaper itself is killed, the job's whole tree still dies. As a container's entrypoint (PID 1) it
reaps every zombie and forwards signals.

Signals INT, TERM, HUP, QUIT, USR1, USR2 and WINCH sent to reaper are forwarded to COMMAND's process
group. After INT or TERM, COMMAND has --grace to exit before everything is killed; a second INT or
TERM kills at once.

Exit status:
  COMMAND's status, or 128+N if it died of signal N
  123  --fail-on-leftovers was given, COMMAND succeeded, and it left processes running
  124  --timeout ended the job
  125  reaper run itself failed, or was given a flag it cannot take
  126  COMMAND was found but could not be executed
  127  COMMAND was not found

Every flag can also be set from the environment as REAPER_<NAME>.

Flags:
`

// runConfig is what the run command's flags and environment set.
type runConfig struct {
	grace           time.Duration
	timeout         time.Duration
	quiet           bool
	verbose         bool
	report          string
	failOnLeftovers bool
	containment     string
	cgroupRoot      string
	stateDir        string
	argv            []string
}

// parseRun parses the run command's arguments and environment.
func parseRun(args []string, getenv func(string) string) (runConfig, error) {
	var c runConfig
	fs := newFlagSet("run")
	fs.DurationVar(&c.grace, "grace", reaper.DefaultGrace, "time between SIGTERM and SIGKILL for what the command left, and after a forwarded INT or TERM (0: SIGKILL at once)")
	fs.DurationVar(&c.timeout, "timeout", 0, "end the whole job after this `duration` (SIGTERM, grace, kill) and exit 124 (0: no limit)")
	fs.BoolVar(&c.quiet, "quiet", false, "do not name what was killed on stderr")
	fs.BoolVar(&c.verbose, "verbose", false, "say on stderr how processes are contained, and log what reaper does")
	fs.StringVar(&c.report, "report", "", "write what happened, the killed leftovers included, as JSON to `file`")
	fs.BoolVar(&c.failOnLeftovers, "fail-on-leftovers", false, "exit 123 when the command succeeded but left processes running")
	fs.StringVar(&c.containment, "containment", "auto", "auto, cgroup (require cgroup v2) or process (process groups and /proc walk only)")
	fs.StringVar(&c.cgroupRoot, "cgroup-root", "", "absolute `path` of the cgroup under which the job's slice is created (default: a child \"reaper\" of reaper's own cgroup)")
	stateDirFlag(fs, &c.stateDir)
	if err := parseFlags(fs, args, true, getenv); err != nil {
		return c, err
	}
	c.argv = fs.Args()
	switch {
	case len(c.argv) == 0:
		return c, errors.New("no command given")
	case c.grace < 0, c.timeout < 0:
		return c, errors.New("--grace and --timeout must not be negative")
	}
	if _, err := reaper.ParseContainment(c.containment); err != nil {
		return c, err
	}
	return c, nil
}

// runReport is what --report writes.
type runReport struct {
	Command     []string      `json:"command"`
	ExitCode    int           `json:"exit_code"`
	TimedOut    bool          `json:"timed_out"`
	Leftovers   []reaper.Proc `json:"leftovers"`
	Duration    float64       `json:"duration_seconds"`
	Containment string        `json:"containment"`
	Error       string        `json:"error,omitempty"`
}

// runCommand runs the run command and returns the process's exit status. Started by a user, it is
// the guard; started by the guard, it is the server that runs the job.
func runCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	closeOnExec()
	c, err := parseRun(args, getenv)
	if code := parsed("run", runUsage, err, stdout, stderr, exitFailed); code >= 0 {
		return code
	}
	if getenv(reaper.EnvGuardPid) == "" {
		return guard(guardSpec{command: "run", terminal: true, crashed: exitFailed}, args, getenv, stderr)
	}
	link, err := reaper.GuardedBy(getenv(reaper.EnvGuardPid), getenv(reaper.EnvGuardFD))
	if err != nil {
		fmt.Fprintf(stderr, "reaper run: %v\n", err)
		return exitFailed
	}
	j := &jobRun{c: c, link: link, stderr: stderr, log: slog.New(slog.DiscardHandler), start: time.Now()}
	if c.verbose {
		j.log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	return j.run()
}

// jobRun is the server side of one reaper run.
type jobRun struct {
	c      runConfig
	link   reaper.GuardLink
	stderr io.Writer
	log    *slog.Logger
	start  time.Time
	r      *reaper.Reaper
	s      *reaper.Session
	job    *reaper.Job
	term   reaper.Terminal // the terminal the job has the foreground of, if fg
	fg     bool
	rep    runReport
}

// forwardedSignals are passed on to the job's process group.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

func (j *jobRun) run() int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, handledSignals(forwardedSignals...)...)
	defer signal.Stop(sigs)
	j.rep.Command = j.c.argv
	if code := j.setUp(); code != 0 {
		j.rep.ExitCode = code
		j.writeReport()
		return code
	}
	code := j.wait(sigs)
	j.rep.ExitCode = code
	if code == 0 && len(j.rep.Leftovers) > 0 && j.c.failOnLeftovers {
		j.rep.ExitCode = exitLeftovers
	}
	j.finish()
	return j.rep.ExitCode
}

// setUp creates the Reaper, the session and the job, and returns a non-zero status on failure.
func (j *jobRun) setUp() int {
	containment, _ := reaper.ParseContainment(j.c.containment)
	opts := reaper.Options{
		Containment: containment,
		Cgroup:      cgroup.Options{Root: j.c.cgroupRoot, Companions: companions(j.link)},
		StateDir:    j.c.stateDir,
		Grace:       graceOption(j.c.grace),
		Logger:      j.log,
	}
	if j.link.Announce != nil {
		opts.Announce = j.link.Announce
		defer j.link.Announce.Close()
	}
	r, err := reaper.New(opts)
	if err != nil {
		fmt.Fprintf(j.stderr, "reaper run: %v\n", err)
		j.rep.Error = err.Error()
		return exitFailed
	}
	j.r = r
	j.rep.Containment = r.Containment().Mode.String()
	if j.c.verbose {
		fmt.Fprintf(j.stderr, "reaper run: containment %s\n", r.Containment())
	}
	wd, _ := os.Getwd()
	j.s, err = r.NewSession("run", reaper.SessionOptions{WorkDir: wd})
	if err == nil {
		j.term, j.fg = reaper.ForegroundTerminal(os.Stdin, guardGroup(j.link))
		j.job, err = j.s.Exec(reaper.ExecOptions{Argv: j.c.argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Foreground: j.fg})
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
func (j *jobRun) execFailed(err error) int {
	name := j.c.argv[0]
	var errno syscall.Errno
	switch {
	case errors.Is(err, reaper.ErrNotFound):
		fmt.Fprintf(j.stderr, "reaper run: %s: command not found\n", name)
		return exitNotFound
	case errors.Is(err, reaper.ErrNotExecutable) && errors.As(err, &errno):
		fmt.Fprintf(j.stderr, "reaper run: %s: %v\n", name, errno)
		return exitNotExecutable
	case errors.Is(err, reaper.ErrNotExecutable):
		fmt.Fprintf(j.stderr, "reaper run: %s: cannot execute\n", name)
		return exitNotExecutable
	}
	fmt.Fprintf(j.stderr, "reaper run: %v\n", err)
	return exitFailed
}

// guardGroup is the process group reaper run was started in: its guard's.
func guardGroup(link reaper.GuardLink) int {
	pgrp, err := syscall.Getpgid(link.Pid)
	if err != nil {
		return -1
	}
	return pgrp
}

// wait runs the job to its end and tears the session down, and returns the job's exit status. Signals
// are forwarded to the job; after INT or TERM (or another shutdown signal, forwarded as TERM) the job
// has the grace period to exit before everything is killed; a second one kills at once, and so does
// the guard's death. --timeout ends the job with the grace period.
func (j *jobRun) wait(sigs <-chan os.Signal) int {
	done := make(chan int, 1)
	waitCtx, stopWaiting := context.WithCancel(context.Background())
	go func() {
		code, _ := j.job.Wait(waitCtx)
		done <- code
	}()
	var timeout, graceEnd <-chan time.Time
	if j.c.timeout > 0 {
		t := time.NewTimer(j.c.timeout)
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
		if j.link.WaitGone(waitCtx) {
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
			j.closeSession(hurry)
			return code
		case <-timeout:
			timeout = nil
			fmt.Fprintf(j.stderr, "reaper run: timed out after %v\n", j.c.timeout)
			j.rep.TimedOut = true
			j.rep.Leftovers = j.othersThanCommand()
			j.s.Close(hurry) // SIGTERM, grace, kill: the whole job
			<-done
			return exitTimedOut
		case <-graceEnd:
			graceEnd = nil
			end()
		case <-guardGone:
			guardGone = nil
			fmt.Fprintln(j.stderr, "reaper run: its guard process was killed: killing the job")
			end()
		case sig := <-sigs:
			s := sig.(syscall.Signal)
			switch {
			case isIgnored(s):
				continue
			case s == reaper.GuardSignal && j.link.Gone():
				continue // the guard watcher above ends the job
			case !isForwarded(s):
				s = syscall.SIGTERM // a shutdown signal the job would not expect: ask it to end
			}
			if err := j.job.Signal(s); err != nil {
				j.log.Warn("forwarding a signal failed", "signal", s.String(), "error", err)
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

func isForwarded(sig os.Signal) bool { return slices.Contains(forwardedSignals, sig) }

// othersThanCommand returns the session's processes but the command itself: what it started, which
// is what a summary names as left over when the job is ended before the command exited.
func (j *jobRun) othersThanCommand() []reaper.Proc {
	var out []reaper.Proc
	for _, p := range j.s.Processes() {
		if p.Pid != j.job.Pid() {
			out = append(out, p)
		}
	}
	return out
}

// closeSession tears down what the job left, once it has exited: what is alive now is named in the
// summary, then it gets SIGTERM, the grace period and SIGKILL. hurry cuts the grace period short.
func (j *jobRun) closeSession(hurry context.Context) {
	if j.rep.Leftovers == nil {
		j.rep.Leftovers = j.s.Processes()
	}
	if _, err := j.s.Close(hurry); err != nil {
		j.log.Warn("tearing down the job's session", "error", err)
	}
}

// finish gives the terminal back, closes the Reaper, and names what was killed.
func (j *jobRun) finish() {
	if j.fg {
		// This process is in a background group of the terminal: without ignoring SIGTTOU, taking
		// the terminal back (and, with tostop, writing to it) would stop it.
		signal.Ignore(syscall.SIGTTOU)
		if err := j.term.Restore(); err != nil {
			j.log.Warn("giving the terminal back", "error", err)
		}
	}
	if err := j.r.Close(context.Background()); err != nil {
		j.log.Warn("closing the reaper", "error", err)
	}
	j.rep.Duration = time.Since(j.start).Seconds()
	if n := len(j.rep.Leftovers); n > 0 && !j.c.quiet {
		fmt.Fprintf(j.stderr, "reaper run: killed %s%s\n", count(n, "leftover process", "leftover processes"), procList(j.rep.Leftovers))
	}
	j.writeReport()
}

// writeReport writes the --report file, if one was asked for.
func (j *jobRun) writeReport() {
	if j.c.report == "" {
		return
	}
	var b bytes.Buffer
	writeJSON(&b, j.rep)
	if err := os.WriteFile(j.c.report, b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(j.stderr, "reaper run: --report: %v\n", err)
	}
}
