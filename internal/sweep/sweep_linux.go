package sweep

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/safefs"
)

// Options configures Run. The zero value looks where a Reaper with zero Options keeps its
// instances, and kills what it finds.
type Options struct {
	instance.Where
	// DryRun lists what would be killed and removed, and does neither.
	DryRun bool
	// Skip names an instance to leave alone whatever its state: the caller's own.
	Skip string
	// CloseTimeout bounds the wait for killed processes to disappear; zero means kill.DefaultTimeout.
	CloseTimeout time.Duration
	// Logger receives failures to signal. Nil discards.
	Logger *slog.Logger
}

// Report says what Run found and did.
type Report struct {
	// Dead are the instances whose process is gone, and what they left.
	Dead []DeadInstance `json:"dead"`
	// Live are the instances found running and left alone.
	Live []string `json:"live"`
	// Ignored are what was found and not acted on because it is not what reaper makes, and why: a
	// cgroup below the root or an entry in the state directory that is not an instance's, a record
	// that does not hold, a slice that is a mount point or holds the caller's cgroup, a slice that a
	// record names elsewhere than below the root.
	Ignored []instance.Ignored `json:"ignored,omitempty"`
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

	slice    *cgroup.Slice // its slice, checked (cgroup.Root.Open); nil when there is none to act on
	rootMade []string      // what its record says it made for the root (see cgroup.Root.RemoveMade)
}

// Run finds the instances whose process has died (by SIGKILL, an OOM kill, a crash, a machine that
// killed a whole process group) and kills and removes what they left: their slices under the root,
// the processes that carry their marker anywhere (process containment leaves no slice; escapees leave
// it), and their state directories. It never touches an instance that is alive: an instance is named
// by its process's pid and start time, so a pid that was reused does not pass for it, and a slice
// holding processes of another pid namespace is left alone. Several instances may sweep at once.
//
// The marker scan reads the environment of every process on the machine, and runs only when there is
// a dead instance.
func Run(opts Options) (Report, error) {
	if opts.CloseTimeout < 0 {
		return Report{}, errors.New("sweep: Options.CloseTimeout is negative (zero means the default)")
	}
	if opts.CloseTimeout == 0 {
		opts.CloseTimeout = kill.DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sw := &sweeper{opts: opts, w: proc.NewWalker(), k: kill.Policy{Log: opts.Logger, Timeout: opts.CloseTimeout}}
	defer sw.close()
	var rep Report
	dead, err := sw.find(&rep)
	errs := []error{err}
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
	if !opts.DryRun {
		errs = append(errs, sw.removeRoot(dead))
	}
	return rep, errors.Join(errs...)
}

// removeRoot removes what the dead instances made for the root, now that their slices are gone: the
// root and the parents they made, as long as nothing else uses them (a live instance's slice keeps
// the root, as does a slice that could not be removed).
func (sw *sweeper) removeRoot(dead map[string]*DeadInstance) error {
	if sw.root == nil {
		return nil
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(dead)) {
		if d := dead[name]; d.Removed {
			errs = append(errs, sw.root.RemoveMade(d.rootMade))
		}
	}
	return errors.Join(errs...)
}

type sweeper struct {
	opts  Options
	w     *proc.Walker
	k     kill.Policy
	state *safefs.Dir  // the state directory, when there is one to look in
	root  *cgroup.Root // the root looked under, when there is one
}

func (sw *sweeper) close() {
	if sw.state != nil {
		sw.state.Close()
	}
}

// find collects the instances under the root and in the state directory (instance.Find), sorts the
// live from the dead, and leaves out the caller's own.
func (sw *sweeper) find(rep *Report) (map[string]*DeadInstance, error) {
	l, err := sw.opts.Look(func(name string) bool {
		if name == sw.opts.Skip {
			return false
		}
		if instance.Alive(sw.w, name) {
			rep.Live = append(rep.Live, name)
			return false
		}
		return true
	})
	sw.root, sw.state, rep.Ignored = l.Root, l.State, l.Ignored
	dead := make(map[string]*DeadInstance, len(l.Found))
	for name, f := range l.Found {
		d := &DeadInstance{Name: name, StateDir: f.StateDir, slice: f.Slice, rootMade: f.Record.RootMade}
		if f.Slice != nil {
			d.Slice = f.Slice.Path()
		}
		dead[name] = d
	}
	slices.Sort(rep.Live)
	return dead, err
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
	prefix := []byte(instance.EnvSession + "=")
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
	note := func(ps []proc.Proc) {
		for _, q := range ps {
			d := owner[q.Pid]
			if d != nil && !slices.ContainsFunc(d.Processes, func(o proc.Proc) bool { return o.Pid == q.Pid }) {
				d.Processes = append(d.Processes, q)
			}
		}
	}
	if sw.opts.DryRun {
		for _, p := range found {
			note([]proc.Proc{proc.Describe(p.Pid)})
		}
		return nil
	}
	if len(found) == 0 {
		return nil
	}
	killed, _, err := sw.k.Processes(context.Background(), found, time.Now().Add(sw.opts.CloseTimeout))
	note(killed)
	return err
}

// remove removes a dead instance's slice and state directory.
func (sw *sweeper) remove(d *DeadInstance) {
	var errs []error
	if d.slice != nil {
		errs = append(errs, d.slice.Remove())
	}
	if d.StateDir != "" {
		errs = append(errs, sw.state.RemoveAll(instance.DirName(d.Name)))
	}
	if err := errors.Join(errs...); err != nil {
		d.Error = err.Error()
		return
	}
	d.Removed = true
}
