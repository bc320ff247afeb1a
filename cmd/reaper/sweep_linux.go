package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/sweep"
	"github.com/cgreaper/reaper/reaper"
)

const sweepUsage = `Usage: reaper sweep [flags]

Finds the reaper instances whose process has died (SIGKILL, an OOM kill, a crash, a machine that killed
a whole process group) and kills and removes what they left: their slices, the processes that carry
their marker, their state directories. Live instances are never touched. Every reaper does this when it
starts; this command does it on demand. It looks where "reaper serve" with the same flags (and from the
same cgroup) keeps its instances.

Every flag can also be set from the environment as REAPER_<NAME>.

Flags:
`

// sweepCommand runs the sweep command and returns the process's exit status.
func sweepCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var w where
	var dryRun bool
	fs := w.flagSet("sweep", "auto or cgroup: look for slices and state directories; process: state directories only", "print the report as JSON")
	fs.BoolVar(&dryRun, "dry-run", false, "list what would be killed and removed, and do neither")
	return look(fs, &w, sweepUsage, args, getenv, stdout, stderr, func(noCgroup bool) (sweep.Report, error) {
		return sweep.Run(sweep.Options{Where: instance.Where{Cgroup: cgroup.Options{Root: w.cgroupRoot}, StateDir: w.stateDir, NoCgroup: noCgroup}, DryRun: dryRun})
	}, func(rep sweep.Report) { printSweep(stdout, rep, dryRun) })
}

func printSweep(w io.Writer, rep sweep.Report, dryRun bool) {
	kill, remove := "killed", "removed"
	if dryRun {
		kill, remove = "would kill", "would remove"
	}
	for _, d := range rep.Dead {
		ps := make([]reaper.Proc, len(d.Processes))
		for i, p := range d.Processes {
			ps[i] = reaper.Proc(p) // the same description as reaper run's leftovers
		}
		fmt.Fprintf(w, "dead instance %s: %s %s%s\n", printable(d.Name), kill, count(len(ps), "process", "processes"), procList(ps))
		for _, p := range []string{d.Slice, d.StateDir} {
			if p != "" && (dryRun || d.Removed) {
				fmt.Fprintf(w, "  %s %s\n", remove, printable(p))
			}
		}
		if d.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", printable(d.Error))
		}
	}
	for _, name := range rep.Live {
		fmt.Fprintf(w, "live instance %s: left alone\n", printable(name))
	}
	printIgnored(w, rep.Ignored)
	if len(rep.Dead) == 0 {
		fmt.Fprintln(w, "no dead instances")
	}
}

// count says n things: "1 process", "2 processes", "0 processes".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// procList names processes as "sleep (pid 812, 41s)", after a colon.
func procList(ps []reaper.Proc) string {
	if len(ps) == 0 {
		return ""
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		pid := fmt.Sprintf("pid %d", p.Pid)
		if p.SessionPid > 0 { // the job's pid for it first: what its own commands printed
			pid = fmt.Sprintf("pid %d, host pid %d", p.SessionPid, p.Pid)
		}
		names[i] = fmt.Sprintf("%s (%s, %v)", printable(p.Comm), pid, p.Age.Round(time.Second))
	}
	return ": " + strings.Join(names, ", ")
}
