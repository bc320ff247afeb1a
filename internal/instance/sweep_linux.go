package instance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/safefs"
	"golang.org/x/sys/unix"
)

// SweepOptions configures Sweep. The zero value looks where a Reaper with zero Options keeps its
// instances, and kills what it finds.
type SweepOptions struct {
	// Cgroup names the slice root to look under (see reaper's Options.Cgroup). Where it does not exist or
	// cannot be used, only state directories are looked at.
	Cgroup cgroup.Options
	// StateDir is where instances keep their state directories; empty means DefaultStateDir().
	StateDir string
	// NoCgroup looks at state directories only (for instances in process containment).
	NoCgroup bool
	// DryRun lists what would be killed and removed, and does neither.
	DryRun bool
	// Skip names an instance to leave alone whatever its state: the caller's own.
	Skip string
	// CloseTimeout bounds the wait for killed processes to disappear; zero means kill.DefaultTimeout.
	CloseTimeout time.Duration
	// Logger receives failures to signal. Nil discards.
	Logger *slog.Logger
}

// SweepReport says what Sweep found and did.
type SweepReport struct {
	// Dead are the instances whose process is gone, and what they left.
	Dead []DeadInstance `json:"dead"`
	// Live are the instances found running and left alone.
	Live []string `json:"live"`
	// Ignored are what was found and not acted on because it is not what reaper makes, and why: a
	// cgroup below the root or an entry in the state directory that is not an instance's, a record
	// that does not hold, a slice that is a mount point or holds the caller's cgroup, a slice that a
	// record names elsewhere than below the root.
	Ignored []Ignored `json:"ignored,omitempty"`
}

// Ignored is something Sweep or Inspect found and left alone, and why.
type Ignored struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// DeadInstance is what a dead instance left behind.
type DeadInstance struct {
	Name string `json:"name"`
	// Slice is its cgroup, if it was still there; StateDir its state directory, if it was.
	Slice    string `json:"slice,omitempty"`
	StateDir string `json:"state_dir,omitempty"`
	// Processes are the processes of its sessions that were still running: in its slice, or
	// anywhere with its marker in their environment. They were killed unless the sweep was a dry
	// run.
	Processes []proc.Proc `json:"processes"`
	// Removed reports whether its slice and state directory were removed.
	Removed bool `json:"removed"`
	// Error says what could not be done.
	Error string `json:"error,omitempty"`

	slice *cgroup.Slice // its slice, checked (cgroup.Root.Open); nil when there is none to act on
}

// Sweep finds the instances whose process has died (by SIGKILL, an OOM kill, a crash, a machine that
// killed a whole process group) and kills and removes what they left: their slices under the root,
// the processes that carry their marker anywhere (process containment leaves no slice; escapees leave
// it), and their state directories. It never touches an instance that is alive: an instance is named
// by its process's pid and start time, so a pid that was reused does not pass for it, and a slice
// holding processes of another pid namespace is left alone. Several instances may sweep at once.
//
// The marker scan reads the environment of every process on the machine, and runs only when there is
// a dead instance.
func Sweep(opts SweepOptions) (SweepReport, error) {
	if opts.CloseTimeout < 0 {
		return SweepReport{}, errors.New("sweep: SweepOptions.CloseTimeout is negative (zero means the default)")
	}
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	if opts.CloseTimeout == 0 {
		opts.CloseTimeout = kill.DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sw := &sweeper{opts: opts, w: proc.NewWalker(), k: kill.Policy{Log: opts.Logger, Timeout: opts.CloseTimeout}}
	defer sw.close()
	var rep SweepReport
	dead, errs := sw.find(&rep)
	for _, ig := range rep.Ignored {
		opts.Logger.Warn("sweep: left alone", "path", ig.Path, "reason", ig.Reason)
	}
	if len(dead) == 0 {
		return rep, errors.Join(errs...)
	}
	for _, name := range slices.Sorted(maps.Keys(dead)) {
		errs = append(errs, sw.killSlice(dead[name]))
	}
	errs = append(errs, sw.killMarked(dead))
	for _, name := range slices.Sorted(maps.Keys(dead)) {
		d := dead[name]
		if !opts.DryRun {
			sw.remove(d)
		}
		rep.Dead = append(rep.Dead, *d)
	}
	return rep, errors.Join(errs...)
}

type sweeper struct {
	opts  SweepOptions
	w     *proc.Walker
	k     kill.Policy
	root  *cgroup.Root
	state *safefs.Dir // the state directory, when there is one to look in
}

func (sw *sweeper) close() {
	if sw.state != nil {
		sw.state.Close()
	}
}

// find collects the instances under the root and in the state directory, sorts the live from the
// dead, and leaves out what it must not touch. What it finds is data, not authority: a slice is acted
// on only if it sits directly below the root under an instance's name and passes cgroup.Root.Open; a
// state directory only if it is this user's, named after an instance, in a state directory that is
// this user's alone. A record is read, and what it says of a slice elsewhere is reported, not used.
func (sw *sweeper) find(rep *SweepReport) (map[string]*DeadInstance, []error) {
	var errs []error
	dead := make(map[string]*DeadInstance)
	seen := make(map[string]bool)
	consider := func(name string) *DeadInstance {
		if seen[name] {
			return dead[name]
		}
		seen[name] = true
		if name == sw.opts.Skip {
			return nil
		}
		if alive(sw.w, name) {
			rep.Live = append(rep.Live, name)
			return nil
		}
		dead[name] = &DeadInstance{Name: name}
		return dead[name]
	}
	if !sw.opts.NoCgroup {
		if root, err := cgroup.LookupRoot(sw.opts.Cgroup); err == nil {
			sw.root = root
			errs = append(errs, sw.findSlices(rep, consider))
		}
	}
	state, err := lookStateDir(sw.opts.StateDir)
	if err != nil {
		errs = append(errs, err)
	}
	if state != nil {
		sw.state = state
		errs = append(errs, sw.findStates(rep, consider))
	}
	slices.Sort(rep.Live)
	return dead, errs
}

// findSlices considers the cgroups directly below the root.
func (sw *sweeper) findSlices(rep *SweepReport, consider func(string) *DeadInstance) error {
	names, err := sw.root.Slices()
	for _, name := range names {
		path := filepath.Join(sw.root.Path(), name)
		if _, _, ok := parseName(name); !ok {
			rep.Ignored = append(rep.Ignored, Ignored{path, "not an instance's slice (r<pid>-<start time>)"})
			continue
		}
		s, err := sw.root.Open(name)
		if err != nil {
			rep.Ignored = append(rep.Ignored, Ignored{path, err.Error()})
			continue
		}
		if d := consider(name); d != nil {
			d.Slice, d.slice = path, s
		}
	}
	return err
}

// findStates considers the instances' state directories in the state directory.
func (sw *sweeper) findStates(rep *SweepReport, consider func(string) *DeadInstance) error {
	entries, err := sw.state.Entries(0)
	for _, e := range entries {
		path := sw.state.Join(e.Name)
		if e.Name == TokenFile || strings.HasPrefix(e.Name, "."+TokenFile+".") {
			continue // the state directory's own (see StateToken)
		}
		name, ok := FromDirName(e.Name)
		if !ok {
			rep.Ignored = append(rep.Ignored, Ignored{path, "not an instance's state directory (reaper-r<pid>-<start time>)"})
			continue
		}
		dir, err := sw.state.OpenDir(e.Name)
		if err != nil {
			rep.Ignored = append(rep.Ignored, Ignored{path, err.Error()})
			continue
		}
		d := consider(name)
		if d == nil {
			dir.Close()
			continue
		}
		d.StateDir = path
		in, err := readInstance(dir, name)
		dir.Close()
		switch want := sw.slicePath(name); {
		case err != nil:
			// A directory of ours with a bad record: removed all the same, the record not used.
			rep.Ignored = append(rep.Ignored, Ignored{filepath.Join(path, instanceFile), err.Error()})
		case in.Slice != "" && in.Slice != want:
			rep.Ignored = append(rep.Ignored, Ignored{in.Slice, "named by the record of instance " + name +
				", but it is not that instance's slice below the root looked under (" + cmp.Or(want, "none") + "): not acted on"})
		}
	}
	return err
}

// slicePath is where the slice of the instance name is, below the root looked under; "" without one.
func (sw *sweeper) slicePath(name string) string {
	if sw.root == nil {
		return ""
	}
	return filepath.Join(sw.root.Path(), name)
}

// killSlice kills (or, in a dry run, lists) what is in a dead instance's slice.
func (sw *sweeper) killSlice(d *DeadInstance) error {
	s := d.slice
	if s == nil {
		return nil
	}
	pids, err := s.Pids()
	if err != nil {
		d.Error = err.Error()
		return err
	}
	if populated, _ := s.Populated(); populated && len(pids) == 0 {
		// Processes of another pid namespace: an instance there may be alive.
		d.Error = "holds processes of another pid namespace; left alone"
		d.Slice, d.slice = "", nil
		return nil
	}
	for _, p := range pids {
		// A process the kernel is ending (killed with the instance's PID namespaces, say) stays in
		// cgroup.procs until it leaves the cgroup inside its exit: it no longer runs, and is not
		// listed as left running.
		if st, ok := sw.w.Stat(p); ok && !st.Dead() {
			d.Processes = append(d.Processes, proc.Describe(p))
		}
	}
	if sw.opts.DryRun {
		return nil
	}
	left, err := sw.k.Slice(context.Background(), s, time.Now().Add(sw.opts.CloseTimeout))
	if len(left) > 0 && err == nil {
		err = errors.New("processes remain in " + d.Slice)
	}
	if err != nil {
		d.Error = err.Error()
	}
	return err
}

// killMarked kills (or lists) the processes anywhere that carry a dead instance's marker.
func (sw *sweeper) killMarked(dead map[string]*DeadInstance) error {
	procs, err := sw.w.Snapshot(nil)
	if err != nil {
		return err
	}
	self := os.Getpid()
	prefix := []byte(EnvSession + "=")
	var found []proc.Stat
	owner := make(map[int]*DeadInstance)
	for _, p := range procs {
		if p.Pid == self || p.Dead() {
			continue
		}
		sw.w.EachEnv(p.Pid, func(entry []byte) bool {
			v, ok := bytes.CutPrefix(entry, prefix)
			if !ok {
				return true
			}
			name, _, _ := bytes.Cut(v, []byte{'/'})
			if d := dead[string(name)]; d != nil {
				found = append(found, p)
				owner[p.Pid] = d
				return false
			}
			return true
		})
	}
	hs := sw.w.Verify(found)
	defer proc.CloseAll(hs)
	for _, h := range hs {
		d := owner[h.Pid]
		if !slices.ContainsFunc(d.Processes, func(q proc.Proc) bool { return q.Pid == h.Pid }) {
			d.Processes = append(d.Processes, proc.Describe(h.Pid))
		}
	}
	if sw.opts.DryRun || len(hs) == 0 {
		return nil
	}
	err = proc.SignalAll(hs, unix.SIGKILL)
	sw.w.WaitGone(context.Background(), hs, time.Now().Add(sw.opts.CloseTimeout))
	return err
}

// remove removes a dead instance's slice and state directory.
func (sw *sweeper) remove(d *DeadInstance) {
	var errs []error
	if d.slice != nil {
		errs = append(errs, d.slice.Remove())
	}
	if d.StateDir != "" {
		errs = append(errs, sw.state.RemoveAll(DirName(d.Name)))
	}
	if err := errors.Join(errs...); err != nil {
		d.Error = err.Error()
		return
	}
	d.Removed = true
}
