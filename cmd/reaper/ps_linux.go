package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cgreaper/reaper/cgroup"
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
func ps(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var cgroupRoot, stateDir, containment string
	var asJSON bool
	fs := newFlagSet("ps")
	fs.StringVar(&cgroupRoot, "cgroup-root", "", "absolute `path` of the cgroup the instances' slices are under (default: a child \"reaper\" of this process's cgroup)")
	stateDirFlag(fs, &stateDir)
	fs.StringVar(&containment, "containment", "auto", "auto or cgroup: look at slices, state directories and /proc; process: state directories and /proc only")
	fs.BoolVar(&asJSON, "json", false, "print the listing as JSON")
	err := parseFlags(fs, args, false, getenv)
	var mode reaper.Containment
	if err == nil {
		mode, err = reaper.ParseContainment(containment)
	}
	if code := parsed("ps", psUsage, err, stdout, stderr, badUsage); code >= 0 {
		return code
	}
	in, err := reaper.Inspect(reaper.InspectOptions{Cgroup: cgroup.Options{Root: cgroupRoot}, StateDir: stateDir, NoCgroup: mode == reaper.ContainProcess})
	if asJSON {
		writeJSON(stdout, in)
	} else {
		printPs(stdout, in)
	}
	if err != nil {
		fmt.Fprintf(stderr, "reaper ps: %v\n", err)
		return 1
	}
	return 0
}

// printPs writes the listing for people: one block per instance, sessions and their processes
// indented below it.
func printPs(w io.Writer, in reaper.Inspection) {
	if len(in.Instances) == 0 {
		where := in.StateDir
		if in.Root != "" {
			where = in.Root + " and " + where
		}
		fmt.Fprintf(w, "no reaper instances in %s\n", where)
		return
	}
	for _, iv := range in.Instances {
		state := "dead: its leftovers are for reaper sweep"
		if iv.Alive {
			state = "running"
			if iv.State == "T" || iv.State == "t" {
				state = "stopped (" + iv.State + "): not serving until it gets SIGCONT"
			}
		}
		fmt.Fprintf(w, "instance %s  pid %d  %s", iv.Name, iv.Pid, state)
		if iv.Containment != "" {
			fmt.Fprintf(w, "  containment %s", iv.Containment)
		}
		if !iv.Started.IsZero() {
			fmt.Fprintf(w, "  up %v", time.Since(iv.Started).Round(time.Second))
		}
		fmt.Fprintln(w)
		if iv.Slice != "" {
			fmt.Fprintf(w, "  slice %s\n", iv.Slice)
		}
		if len(iv.Sessions) == 0 {
			fmt.Fprintln(w, "  no sessions")
		}
		for _, sv := range iv.Sessions {
			printSession(w, sv)
		}
	}
}

func printSession(w io.Writer, sv reaper.SessionView) {
	fmt.Fprintf(w, "  session %s", sv.Name)
	if sv.ID != "" {
		fmt.Fprintf(w, " (%s)", sv.ID)
	}
	if !sv.Created.IsZero() {
		fmt.Fprintf(w, "  age %v", time.Since(sv.Created).Round(time.Second))
	}
	fmt.Fprintf(w, "  %s, %s\n", count(len(sv.Tasks), "task", "tasks"), count(len(sv.Processes), "process", "processes"))
	for _, t := range sv.Tasks {
		kind := "fg"
		if t.Background {
			kind = "bg"
		}
		fmt.Fprintf(w, "    task %s %s  pid %d  %s\n", t.ID, kind, t.Pid, oneLine(t.Command, 100))
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
		fmt.Fprintf(tw, "    %d\t%s\t%v\t%s\t%s\t%s\n", p.Pid, p.State, time.Duration(p.Age*float64(time.Second)).Round(time.Second), task, cg, oneLine(p.Command, 80))
	}
	tw.Flush()
}

// oneLine puts s on one line and cuts it to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return s
}
