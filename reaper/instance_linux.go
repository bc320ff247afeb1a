package reaper

import (
	"time"

	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/sweep"
)

// Instance describes a Reaper as it records itself in its state directory (see Reaper.Instance):
// for its guard, for `reaper ps`, and for a later Reaper that sweeps up after it if it dies.
type Instance struct {
	// Name is "r<pid>-<start time>": the Reaper's slice and state directory are named after it, and
	// its tasks' markers (EnvSession) start with it.
	Name string
	// Pid is the process that runs the Reaper.
	Pid int
	// Slice is the Reaper's cgroup, under which every session's slice lives; empty in process
	// containment.
	Slice string
	// StateDir is the Reaper's state directory, in Options.StateDir.
	StateDir string
	// Containment is "cgroup" or "process" (Containment's String).
	Containment string
	// PIDNamespace reports whether each session has a PID namespace of its own.
	PIDNamespace bool
	// Started is when the Reaper started.
	Started time.Time
}

// instanceOf is what an instance's record says, as an Instance.
func instanceOf(r instance.Record) Instance {
	return Instance{Name: r.Name, Pid: r.Pid, Slice: r.Slice, StateDir: r.StateDir, Containment: r.Containment,
		PIDNamespace: r.PIDNamespace, Started: r.Started}
}

// SweepReport says what the sweep after dead instances found and did (see Observer.Swept).
type SweepReport struct {
	// Dead are the instances whose process is gone, and what they left.
	Dead []DeadInstance
	// Live are the names of the instances found running and left alone.
	Live []string
}

// DeadInstance is what a dead instance left behind, and what the sweep did with it.
type DeadInstance struct {
	Name string
	// Slice is its cgroup, if it was still there; StateDir its state directory, if it was.
	Slice, StateDir string
	// Processes are the processes of its sessions that were still running, in its slice or anywhere
	// with its marker in their environment: the sweep killed them.
	Processes []Proc
	// Removed reports whether its slice and state directory were removed.
	Removed bool
	// Error says what could not be done.
	Error string
}

// sweepReport is what the sweep reported, as a SweepReport.
func sweepReport(rep sweep.Report) SweepReport {
	out := SweepReport{Live: rep.Live}
	for _, d := range rep.Dead {
		out.Dead = append(out.Dead, DeadInstance{Name: d.Name, Slice: d.Slice, StateDir: d.StateDir,
			Processes: procs(d.Processes), Removed: d.Removed, Error: d.Error})
	}
	return out
}
