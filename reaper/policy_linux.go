package reaper

import (
	"context"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
)

// KillReport says what a teardown (Session.Close, a task stop or timeout, the check for escapees)
// did.
type KillReport struct {
	// Terminated counts processes that exited after SIGTERM, within the grace period.
	Terminated int
	// Killed counts processes ended by the hard kill (cgroup.kill or SIGKILL).
	Killed int
	// Walked counts, of Killed, the processes outside the slice that got SIGKILL once a walk of
	// /proc had found them; the others were killed with the slice. In process containment every
	// hard-killed process is counted here.
	Walked int
	// Found counts processes outside the slice that the /proc walk attributed to the session (by
	// parent pid or environment marker) or that the check for escapees found (in process
	// containment, every process); they are included in Terminated and Killed.
	Found int
	// Remaining lists processes still alive when the deadline passed (typically in D state): what a
	// last look found alive, never what was merely not seen.
	Remaining []Proc
	// Unaccounted is set when the teardown could not look at everything it ended (a slice it could
	// not list, a walk refused descriptors until the deadline): Remaining may then be short, and
	// the error says what could not be read.
	Unaccounted bool
	// Duration is the time the teardown took.
	Duration time.Duration
	// Usage is what a session's slice counted (CPU time, memory peak, the limits' hits), read once
	// its processes were dead, just before its removal: the last reading there can be. Nil for a
	// task's teardown, without a slice, or where the reading failed (a warning says why).
	Usage *cgroup.Stats
}

// Total is the number of processes the teardown ended.
func (r KillReport) Total() int { return r.Terminated + r.Killed }

func (r KillReport) String() string {
	k := kill.Report{Terminated: r.Terminated, Killed: r.Killed, Walked: r.Walked, Found: r.Found,
		Unaccounted: r.Unaccounted, Duration: r.Duration, Usage: r.Usage}
	for _, p := range r.Remaining {
		k.Remaining = append(k.Remaining, proc.Proc(p))
	}
	return k.String()
}

// killReport is what the kill policy reported, as a KillReport.
func killReport(k kill.Report) KillReport {
	return KillReport{Terminated: k.Terminated, Killed: k.Killed, Walked: k.Walked, Found: k.Found,
		Remaining: procs(k.Remaining), Unaccounted: k.Unaccounted, Duration: k.Duration, Usage: k.Usage}
}

// Proc describes a process in reports: what outlived a kill, what a session runs, what a dead
// instance left.
type Proc struct {
	// Pid is the process's pid here, in the Reaper's PID namespace.
	Pid int
	// Comm is the command name (at most 15 bytes, from /proc/<pid>/stat).
	Comm string
	// State is as in /proc/<pid>/stat: "D" is uninterruptible sleep, "T" stopped, "Z" zombie; "?"
	// when the process was already gone.
	State string
	// Age is how long the process had been running when it was described.
	Age time.Duration
	// SessionPid, if set, is the pid the process has where its session's commands run (the
	// session's PID namespace: what $! printed there, and what kill takes there); Pid is then the
	// pid it has here.
	SessionPid int
}

func (p Proc) String() string { return proc.Proc(p).String() }

// MarshalJSON writes {"pid": 812, "command": "sleep", "state": "S", "age_seconds": 41.2}; with a
// SessionPid, "pid" is that one and "host_pid" the pid here.
func (p Proc) MarshalJSON() ([]byte, error) { return proc.Proc(p).MarshalJSON() }

// procs is ps as Procs.
func procs(ps []proc.Proc) []Proc {
	if ps == nil {
		return nil
	}
	out := make([]Proc, len(ps))
	for i, p := range ps {
		out[i] = Proc(p)
	}
	return out
}

// terminate ends every process of sc by the kill policy (see kill.Policy.Terminate) and tells the
// Observer what it did.
func (r *Reaper) terminate(ctx context.Context, sc kill.Scope) (KillReport, error) {
	rep, err := r.policy.Terminate(ctx, sc)
	k := killReport(rep)
	r.obs.Teardown(k)
	return k, err
}
