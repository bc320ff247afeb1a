package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/safefs"
	"github.com/cgreaper/reaper/job"
	"github.com/cgreaper/reaper/reaper"
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
	contained
	timeout         time.Duration
	quiet           bool
	verbose         bool
	report          string
	failOnLeftovers bool
	argv            []string
}

// parseRun parses the run command's arguments and environment.
func parseRun(args []string, getenv func(string) string) (runConfig, error) {
	var c runConfig
	fs := c.flagSet("run", "job", getenv)
	fs.DurationVar(&c.grace, "grace", reaper.DefaultGrace, "time between SIGTERM and SIGKILL for what the command left, and after a forwarded INT or TERM (0: SIGKILL at once)")
	fs.DurationVar(&c.timeout, "timeout", 0, "end the whole job after this `duration` (SIGTERM, grace, kill) and exit 124 (0: no limit)")
	fs.BoolVar(&c.quiet, "quiet", false, "do not name what was killed on stderr")
	fs.BoolVar(&c.verbose, "verbose", false, "say on stderr how processes are contained, and log what reaper does")
	fs.StringVar(&c.report, "report", "", "write what happened, the killed leftovers included, as JSON to `file`")
	fs.BoolVar(&c.failOnLeftovers, "fail-on-leftovers", false, "exit 123 when the command succeeded but left processes running")
	fs.StringVar(&c.cgroupRoot, "cgroup-root", "", "absolute `path` of the cgroup under which the job's slice is created (default: a child \"reaper\" of reaper's own cgroup)")
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
	return c, c.check()
}

// runCommand runs the run command and returns the process's exit status. Started by a user, it is
// the guard (see runGuard) once its command line is checked; started by the guard, it is the server
// that runs the job (package job).
func runCommand(args []string, e env) int {
	c, err := parseRun(args, e.getenv)
	if code := parsed("run", runUsage, err, e.stdout, e.stderr, job.ExitFailed); code >= 0 {
		return code
	}
	if !guard.Guarded(e.getenv) {
		return runGuard("run", job.ExitFailed, args, e)
	}
	link, err := guard.LinkFrom(e.getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "reaper run: %v\n", err)
		return job.ExitFailed
	}
	log := slog.New(slog.DiscardHandler)
	if c.verbose {
		log = slog.New(slog.NewTextHandler(e.stderr, nil))
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, handledSignals(job.ForwardedSignals...)...)
	rep := job.Run(job.Config{
		Argv:            c.argv,
		Options:         c.options(link, log),
		Timeout:         c.timeout,
		Guard:           link,
		Signals:         sigs,
		Ignored:         isIgnored,
		FailOnLeftovers: c.failOnLeftovers,
		Verbose:         c.verbose,
		Stderr:          e.stderr,
		Log:             log,
	})
	if n := len(rep.Leftovers); n > 0 && !c.quiet {
		fmt.Fprintf(e.stderr, "reaper run: killed %s%s\n", count(n, "leftover process", "leftover processes"), procList(rep.Leftovers))
	}
	if c.report != "" {
		var b bytes.Buffer
		writeJSON(&b, rep)
		// The report's directory may be the job's (a CI workspace): a link or a FIFO the job put at
		// the name is replaced, never written through.
		if err := safefs.ReplaceFile(c.report, b.Bytes(), 0o644); err != nil {
			fmt.Fprintf(e.stderr, "reaper run: --report: %v\n", err)
		}
	}
	e.exit.now(rep.ExitStatus)
	signal.Stop(sigs)
	return rep.ExitStatus
}
