package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/inspect"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/sweep"
	"github.com/cgreaper/reaper/reaper"
)

const psUsage = `Usage: reaper ps [flags]

Lists the reaper instances under the cgroup root and in the state directory, their sessions, the
tasks each session recorded and the processes each session holds (pid, state, age, cgroup,
command): in its slice, or anywhere with its marker (escapees, and every process in process
containment). It reads cgroupfs, /proc and the state directories only and asks no instance anything,
so it works when reaper's API is unreachable or reaper itself is stopped or wedged. It looks where
"reaper serve" with the same flags (and from the same cgroup) keeps its instances; run it as the
user reaper runs as (or root) to see its processes' markers.

Every flag can also be set from the environment as REAPER_<NAME>.

Flags:
`

// ps runs the ps command and returns the process's exit status.
func ps(args []string, e env) int {
	var w where
	fs := w.flagSet("ps", "auto or cgroup: look at slices, state directories and /proc; process: state directories and /proc only", "print the listing as JSON")
	return look(fs, &w, psUsage, args, e, inspect.Run, func(in inspect.Inspection) { printPs(e.stdout, in) })
}

// where is the flags ps and sweep share: where they look for instances, and how they print.
type where struct {
	cgroupRoot, stateDir, containment string
	asJSON                            bool
}

// flagSet returns the flag set of the command name with the common flags, given the usage of
// --containment and of --json.
func (w *where) flagSet(name, containment, asJSON string) *flag.FlagSet {
	fs := newFlagSet(name)
	fs.StringVar(&w.cgroupRoot, "cgroup-root", "", "absolute `path` of the cgroup the instances' slices are under (default: a child \"reaper\" of this process's cgroup)")
	stateDirFlag(fs, &w.stateDir)
	fs.StringVar(&w.containment, "containment", "auto", containment)
	fs.BoolVar(&w.asJSON, "json", false, asJSON)
	return fs
}

// look parses the command line of ps or sweep (fs, with w's flags), runs find where they say,
// prints its report as JSON or with text, and returns the exit status: 1, said on stderr after what
// it found, when find failed.
func look[R any](fs *flag.FlagSet, w *where, usage string, args []string, e env, find func(instance.Where) (R, error), text func(R)) int {
	err := parseFlags(fs, args, false, e.getenv)
	var mode reaper.Containment
	if err == nil {
		mode, err = reaper.ParseContainment(w.containment)
	}
	if code := parsed(fs.Name(), usage, err, e.stdout, e.stderr, badUsage); code >= 0 {
		return code
	}
	rep, err := find(instance.Where{Cgroup: cgroup.Options{Root: w.cgroupRoot}, StateDir: w.stateDir, NoCgroup: mode == reaper.ContainProcess})
	if w.asJSON {
		writeJSON(e.stdout, rep)
	} else {
		text(rep)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "reaper %s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
}

// printPs writes the listing for people: one block per instance, sessions and their processes
// indented below it.
func printPs(w io.Writer, in inspect.Inspection) {
	if len(in.Instances) == 0 {
		where := in.StateDir
		if in.Root != "" {
			where = in.Root + " and " + where
		}
		fmt.Fprintf(w, "no reaper instances in %s\n", printable(where))
	}
	for _, iv := range in.Instances {
		state := "dead: its leftovers are for reaper sweep"
		if iv.Alive {
			state = "running"
			if iv.State == "T" || iv.State == "t" {
				state = "stopped (" + iv.State + "): not serving until it gets SIGCONT"
			}
		}
		fmt.Fprintf(w, "instance %s  pid %d  %s", printable(iv.Name), iv.Pid, printable(state))
		if iv.Containment != "" {
			fmt.Fprintf(w, "  containment %s", printable(iv.Containment))
		}
		if iv.PIDNamespace {
			fmt.Fprint(w, "  pid namespace per session")
		}
		switch {
		case iv.Started.IsZero():
		case iv.Alive:
			fmt.Fprintf(w, "  up %v", time.Since(iv.Started).Round(time.Second))
		default:
			fmt.Fprintf(w, "  started %v ago", time.Since(iv.Started).Round(time.Second))
		}
		fmt.Fprintln(w)
		if iv.Slice != "" {
			fmt.Fprintf(w, "  slice %s\n", printable(iv.Slice))
		}
		if len(iv.Sessions) == 0 {
			fmt.Fprintln(w, "  no sessions")
		}
		for _, sv := range iv.Sessions {
			printSession(w, sv)
		}
	}
	printIgnored(w, in.Ignored)
}

// printIgnored lists what was found and left alone because it is not what reaper makes.
func printIgnored(w io.Writer, ignored []instance.Ignored) {
	for _, ig := range ignored {
		fmt.Fprintf(w, "ignored %s: %s\n", printable(ig.Path), printable(ig.Reason))
	}
}

func printSession(w io.Writer, sv inspect.SessionView) {
	fmt.Fprintf(w, "  session %s", printable(sv.Name))
	if sv.ID != "" {
		fmt.Fprintf(w, " (%s)", printable(sv.ID))
	}
	if !sv.Created.IsZero() {
		fmt.Fprintf(w, "  age %v", time.Since(sv.Created).Round(time.Second))
	}
	fmt.Fprintf(w, "  %s, %s", count(len(sv.Tasks), "task", "tasks"), count(len(sv.Processes), "process", "processes"))
	if sv.Init != 0 {
		fmt.Fprintf(w, "  init %d (its PID namespace)", sv.Init)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "    %s\n", usageLine(sv))
	for _, t := range sv.Tasks {
		kind := "fg"
		if t.Background {
			kind = "bg"
		}
		fmt.Fprintf(w, "    task %s %s  pid %d  %s\n", printable(t.ID), kind, t.Pid, oneLine(t.Command, 100))
	}
	if len(sv.Processes) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "    PID\tSTATE\tAGE\tTASK\tCGROUP\tCOMMAND")
	for _, p := range sv.Processes {
		cg := p.Cgroup
		if p.Outside {
			cg += " (outside its slice)"
		}
		task := p.Task
		if task == "" {
			task = "-"
		}
		fmt.Fprintf(tw, "    %d\t%s\t%v\t%s\t%s\t%s\n", p.Pid, printable(p.State), time.Duration(p.Age*float64(time.Second)).Round(time.Second),
			oneLine(task, 40), oneLine(cg, 200), oneLine(p.Command, 80))
	}
	tw.Flush()
}

// usageLine says what a session's processes used and the limits they hit, as its slice counts them,
// or why nothing counts them.
func usageLine(sv inspect.SessionView) string {
	u := sv.Usage
	if u == nil {
		return "usage not counted: " + printable(sv.NotCounted)
	}
	parts := []string{fmt.Sprintf("cpu %v", time.Duration(u.CPUSeconds*float64(time.Second)).Round(time.Millisecond))}
	if u.MemoryBytes != nil {
		m := "memory " + mib(*u.MemoryBytes)
		if u.MemoryPeakBytes != nil {
			m += ", peak " + mib(*u.MemoryPeakBytes)
		}
		if u.MemoryMaxBytes != nil {
			m += " of " + mib(*u.MemoryMaxBytes)
		}
		parts = append(parts, m, fmt.Sprintf("%d oom kills", *u.OOMKills))
	}
	if u.Pids != nil {
		p := fmt.Sprintf("pids %d", *u.Pids)
		if u.PidsMax != nil {
			p += fmt.Sprintf(" of %d", *u.PidsMax)
		}
		parts = append(parts, p, fmt.Sprintf("%d forks refused", *u.ForksRefused))
	}
	if u.ThrottledPeriods != nil {
		c := fmt.Sprintf("throttled in %d periods (%v)", *u.ThrottledPeriods, time.Duration(*u.ThrottledSeconds*float64(time.Second)).Round(time.Millisecond))
		if u.CPUMax != nil {
			c += fmt.Sprintf(" at %g CPUs", *u.CPUMax)
		}
		parts = append(parts, c)
	}
	return "usage: " + strings.Join(parts, ", ")
}

// mib writes n bytes in MiB, to a tenth.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// oneLine puts s on one line, makes it printable and cuts it to about n bytes (on a character's
// boundary).
func oneLine(s string, n int) string {
	s = printable(strings.Join(strings.Fields(s), " "))
	if len(s) > n {
		cut := n - 3
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// printable makes s safe to print to a terminal: what a process, a task or a record chose must not
// move the cursor, retitle the window, reorder or hide text. Every character that is not printable
// (control characters, C1 codes, formatting and bidirectional controls, bytes that are not UTF-8)
// is written as a Go escape (\x1b, \u202e).
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)): // not UTF-8
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

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
func sweepCommand(args []string, e env) int {
	var w where
	var dryRun bool
	fs := w.flagSet("sweep", "auto or cgroup: look for slices and state directories; process: state directories only", "print the report as JSON")
	fs.BoolVar(&dryRun, "dry-run", false, "list what would be killed and removed, and do neither")
	return look(fs, &w, sweepUsage, args, e, func(at instance.Where) (sweep.Report, error) {
		return sweep.Run(sweep.Options{Where: at, DryRun: dryRun})
	}, func(rep sweep.Report) { printSweep(e.stdout, rep, dryRun) })
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
