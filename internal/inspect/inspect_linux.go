package inspect

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/safefs"
)

// Options configures Run. The zero value looks where a Reaper with zero Options keeps its
// instances.
type Options = instance.Where

// Inspection is what Run found: every instance under the root or in the state directory, alive or
// dead, with its sessions, their tasks and their live processes.
type Inspection struct {
	Root      string             `json:"root,omitempty"` // the slice root looked under; empty when none was
	StateDir  string             `json:"state_dir"`      // the state directory looked in
	Instances []InstanceView     `json:"instances"`
	Ignored   []instance.Ignored `json:"ignored,omitempty"` // what was found and not shown (see instance.Where.Look)
}

// InstanceView is one instance as Run found it.
type InstanceView struct {
	instance.Record
	// Alive reports whether the instance's process still runs; a dead one's leftovers are what
	// `reaper sweep` removes.
	Alive bool `json:"alive"`
	// State is its process's state as /proc shows it: "S" sleeping, "R" running, "T" stopped (SIGSTOP),
	// "D" uninterruptible; empty when it is dead.
	State    string        `json:"process_state,omitempty"`
	Sessions []SessionView `json:"sessions"`

	slice *cgroup.Slice // its slice below the root, checked (cgroup.Root.Open)
	dir   *safefs.Dir   // its state directory, checked (safefs); closed once inspected
}

// SessionView is one session of an instance.
type SessionView struct {
	// Name is the session's slice name ("s-3"); ID the name it goes by in logs ("mcp-1a2b..." or
	// "stdio-..."), when its record says.
	Name    string    `json:"name"`
	ID      string    `json:"id,omitempty"`
	Slice   string    `json:"slice,omitempty"`
	Created time.Time `json:"created,omitzero"`
	// Init is the pid of the init of the session's PID namespace (where the session has one, from its
	// cgroup or its record); it is not among Processes, which are the session's own.
	Init int `json:"init_pid,omitempty"`
	// Tasks are the tasks the session kept when it last started one (its record on disk).
	Tasks []instance.TaskView `json:"tasks"`
	// Processes are the session's live processes: in its slice, or anywhere with its marker.
	Processes []ProcessView `json:"processes"`
	// Usage is what its processes used and the limits they hit, as its slice counts them; absent
	// where nothing counts them, and NotCounted says why (process containment, no slice).
	Usage      *UsageView `json:"usage,omitempty"`
	NotCounted string     `json:"usage_not_counted,omitempty"`
}

// UsageView is what a session's slice counts. A figure whose controller is not enabled for the slice
// (no limit of that kind set) is absent, rather than 0.
type UsageView struct {
	// CPUSeconds is the CPU time its processes used, those that ended included.
	CPUSeconds float64 `json:"cpu_seconds"`
	// MemoryBytes is what they use now (memory.current), MemoryPeakBytes the most they used at once
	// (memory.peak), MemoryMaxBytes their limit (memory.max).
	MemoryBytes     *int64 `json:"memory_bytes,omitempty"`
	MemoryPeakBytes *int64 `json:"memory_peak_bytes,omitempty"`
	MemoryMaxBytes  *int64 `json:"memory_max_bytes,omitempty"`
	// OOMKills are its processes the OOM killer killed at the memory limit.
	OOMKills *int64 `json:"oom_kills,omitempty"`
	// Pids is its processes and threads now (pids.current), PidsMax their limit, ForksRefused the
	// forks refused at it.
	Pids         *int64 `json:"pids,omitempty"`
	PidsMax      *int64 `json:"pids_max,omitempty"`
	ForksRefused *int64 `json:"forks_refused,omitempty"`
	// CPUMax is its CPU limit in CPUs; ThrottledPeriods the periods of it in which its processes were
	// held back, ThrottledSeconds how long they waited.
	CPUMax           *float64 `json:"cpu_max,omitempty"`
	ThrottledPeriods *int64   `json:"cpu_throttled_periods,omitempty"`
	ThrottledSeconds *float64 `json:"cpu_throttled_seconds,omitempty"`
}

// notCounted says why nothing counts what a session used, or "" when its slice does.
func notCounted(iv *InstanceView, sv SessionView) string {
	switch {
	case sv.Usage != nil:
		return ""
	case iv.Containment == instance.ContainProcess:
		return "process containment"
	case sv.Slice == "":
		return "no slice (no command run yet, or its slice is gone)"
	}
	return "its slice could not be read"
}

// usageView converts what a slice counts into what the listing shows.
func usageView(st cgroup.Stats) *UsageView {
	u := &UsageView{CPUSeconds: st.CPU.Seconds()}
	limit := func(v int64) *int64 {
		if v == 0 {
			return nil // none set
		}
		return &v
	}
	if st.MemoryCounted {
		u.MemoryBytes, u.MemoryPeakBytes, u.MemoryMaxBytes, u.OOMKills = &st.Memory, &st.MemoryPeak, limit(st.Limits.MemoryMax), &st.OOMKills
		if st.MemoryPeak == 0 { // a kernel before 5.19 keeps none
			u.MemoryPeakBytes = nil
		}
	}
	if st.PidsCounted {
		u.Pids, u.PidsMax, u.ForksRefused = &st.Pids, limit(st.Limits.PidsMax), &st.ForksRefused
	}
	if st.ThrottlingCounted {
		waited := st.ThrottledTime.Seconds()
		u.ThrottledPeriods, u.ThrottledSeconds = &st.Throttled, &waited
		if st.Limits.CPUs > 0 {
			u.CPUMax = &st.Limits.CPUs
		}
	}
	return u
}

// ProcessView is one live process of a session.
type ProcessView struct {
	Pid     int     `json:"pid"`
	Command string  `json:"command"`
	State   string  `json:"state"`  // as in /proc/<pid>/stat ("S", "R", "D", "T", "Z")
	Cgroup  string  `json:"cgroup"` // as /proc/<pid>/cgroup shows it
	Age     float64 `json:"age_seconds"`
	Task    string  `json:"task,omitempty"` // the task it belongs to, when known (its leaf or its marker)
	// Outside reports a process of a cgroup-contained session found outside the session's slice
	// (by its marker): an escapee, which the session's end kills too.
	Outside bool `json:"outside_slice,omitempty"`
}

// Run lists the instances under the root and in the state directory, their sessions, tasks and
// processes. It reads cgroupfs, /proc and the instances' state directories only, never asks an
// instance anything, and changes nothing: it works while an instance is stopped or wedged. The scan
// for markers reads the environment of every process this user may read. What it finds on disk is
// checked as the sweep checks it (instance.Where.Look).
func Run(opts Options) (Inspection, error) {
	if opts.StateDir == "" {
		opts.StateDir = instance.DefaultStateDir()
	}
	in := Inspection{StateDir: opts.StateDir, Instances: []InstanceView{}}
	l, err := opts.Look(nil)
	if l.State != nil {
		defer l.State.Close()
	}
	if l.Root != nil {
		in.Root = l.Root.Path()
	}
	in.Ignored = l.Ignored
	w := proc.NewWalker()
	byName := make(map[string]*InstanceView, len(l.Found))
	for name, f := range l.Found {
		iv := &InstanceView{Record: instance.Record{Name: name}, slice: f.Slice}
		if f.HasRecord {
			iv.Record = f.Record
		}
		// The slice and the state directory shown are what was found, not what the record says.
		iv.StateDir, iv.Slice = f.StateDir, ""
		if f.Slice != nil {
			iv.Slice = f.Slice.Path()
		}
		if f.StateDir != "" {
			iv.dir, _ = l.State.OpenDir(instance.DirName(name))
		}
		iv.inspect(w)
		byName[name] = iv
	}
	markedProcesses(w, byName)
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		iv := byName[name]
		for i := range iv.Sessions {
			iv.Sessions[i].NotCounted = notCounted(iv, iv.Sessions[i])
		}
		slices.SortFunc(iv.Sessions, func(a, b SessionView) int { return cmp.Compare(sessionSeq(a.Name), sessionSeq(b.Name)) })
		in.Instances = append(in.Instances, *iv)
	}
	return in, err
}

// inspect fills in the instance's liveness, its sessions (from its state directory and its slice)
// and the processes in their slices.
func (iv *InstanceView) inspect(w *proc.Walker) {
	pid, start, _ := instance.ParseName(iv.Name)
	iv.Pid, iv.Start = pid, start
	if iv.Alive = instance.Alive(w, iv.Name); iv.Alive {
		iv.State = proc.Describe(pid).State
	}
	sessions := make(map[string]*SessionView)
	get := func(name string) *SessionView {
		if sessions[name] == nil {
			sessions[name] = &SessionView{Name: name, Tasks: []instance.TaskView{}, Processes: []ProcessView{}}
		}
		return sessions[name]
	}
	if iv.dir != nil {
		entries, _ := iv.dir.Entries(0)
		for _, e := range entries {
			if !instance.ValidSessionName(e.Name) {
				continue
			}
			sv := get(e.Name)
			sdir, err := iv.dir.OpenDir(e.Name)
			if err != nil {
				continue
			}
			if rec, err := instance.ReadSessionRecord(sdir); err == nil && rec.Name == e.Name {
				sv.ID, sv.Created, sv.Tasks, sv.Init = rec.ID, rec.Created, rec.Tasks, rec.Init
			}
			sdir.Close()
		}
		iv.dir.Close()
	}
	if iv.slice != nil {
		names, _ := iv.slice.Children()
		for _, name := range names {
			if !instance.ValidSessionName(name) { // the inits' leaf, among others: a session's init is in its record
				continue
			}
			if s, err := iv.slice.Leaf(name); err == nil {
				sv := get(name)
				sv.Slice = s.Path()
				sv.sliceProcesses(s)
				if st, err := s.Stats(); err == nil {
					sv.Usage = usageView(st)
				}
			}
		}
	}
	for _, sv := range sessions {
		iv.Sessions = append(iv.Sessions, *sv)
	}
	if iv.Sessions == nil {
		iv.Sessions = []SessionView{}
	}
}

// sliceProcesses lists the processes in the session's slice, leaf by leaf, each with the last task
// recorded in its leaf (a leaf is reused only once it is empty).
func (sv *SessionView) sliceProcesses(slice *cgroup.Slice) {
	leafTask := make(map[string]string)
	for _, t := range sv.Tasks { // oldest first: the last task of a leaf wins
		if t.Leaf != "" {
			leafTask[t.Leaf] = t.ID
		}
	}
	pids, _ := slice.OwnPids() // the leaves are listed on their own
	for _, pid := range pids {
		sv.Processes = append(sv.Processes, describe(pid, "", false))
	}
	leaves, _ := slice.Children()
	for _, name := range leaves {
		leaf, err := slice.Leaf(name)
		if err != nil {
			continue
		}
		pids, _ := leaf.Pids()
		for _, pid := range pids {
			sv.Processes = append(sv.Processes, describe(pid, leafTask[leaf.Path()], false))
		}
	}
}

// markedProcesses adds, to the sessions of the instances listed, every process on the machine that
// carries one of their markers and was not found in a slice: all processes in process containment,
// escapees in cgroup containment.
func markedProcesses(w *proc.Walker, instances map[string]*InstanceView) {
	seen := make(map[int]bool)
	for _, iv := range instances {
		for _, sv := range iv.Sessions {
			for _, p := range sv.Processes {
				seen[p.Pid] = true
			}
		}
	}
	procs, err := w.Snapshot(seen)
	if err != nil {
		return
	}
	for _, st := range procs {
		// One read of the environment for both entries.
		var v, task string
		w.EachEnv(st.Pid, func(e []byte) bool {
			if rest, ok := bytes.CutPrefix(e, []byte(instance.EnvSession+"=")); ok && v == "" {
				v = string(rest)
			} else if rest, ok := bytes.CutPrefix(e, []byte(instance.EnvTask+"=")); ok && task == "" {
				task = string(rest)
			}
			return v == "" || task == ""
		})
		if v == "" {
			continue
		}
		inst, session, _ := strings.Cut(v, "/")
		iv := instances[inst]
		if iv == nil || session == "" {
			continue
		}
		i := slices.IndexFunc(iv.Sessions, func(sv SessionView) bool { return sv.Name == session })
		if i < 0 {
			iv.Sessions = append(iv.Sessions, SessionView{Name: session, Tasks: []instance.TaskView{}, Processes: []ProcessView{}})
			i = len(iv.Sessions) - 1
		}
		iv.Sessions[i].Processes = append(iv.Sessions[i].Processes, describe(st.Pid, task, iv.Containment == instance.ContainCgroup))
	}
	for _, iv := range instances {
		for i := range iv.Sessions {
			slices.SortFunc(iv.Sessions[i].Processes, func(a, b ProcessView) int { return cmp.Compare(a.Pid, b.Pid) })
		}
	}
}

// describe reads what a listing shows of a process.
func describe(pid int, task string, outside bool) ProcessView {
	p := proc.Describe(pid)
	cmdline := proc.CommandLine(pid)
	if cmdline == "" {
		cmdline = p.Comm
	}
	return ProcessView{
		Pid: pid, Command: cmdline, State: p.State, Cgroup: proc.Cgroup(pid),
		Age: p.Age.Round(time.Millisecond).Seconds(), Task: task, Outside: outside,
	}
}

// sessionSeq is the number in a session's name ("s-12": 12), for sorting.
func sessionSeq(name string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "s-"))
	return n
}
