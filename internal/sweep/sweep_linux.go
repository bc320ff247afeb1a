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
	DryRun bool   // list what would be killed and removed, and do neither
	Skip   string // an instance to leave alone whatever its state: the caller's own
	// CloseTimeout bounds the wait for killed processes to disappear; zero means kill.DefaultTimeout.
	CloseTimeout time.Duration
	Logger       *slog.Logger // failures to signal; nil discards
}

// Report says what Run found and did.
type Report struct {
	Dead []DeadInstance `json:"dead"` // the instances whose process is gone, and what they left
	Live []string       `json:"live"` // the instances found running and left alone
	// Ignored are what was found and not acted on, and why (see instance.Where.Look).
	Ignored []instance.Ignored `json:"ignored,omitempty"`
}

// DeadInstance is what a dead instance left behind.
type DeadInstance struct {
	Name string `json:"name"`
	// Slice is its cgroup, if it was still there; StateDir its state directory, if it was.
	Slice    string `json:"slice,omitempty"`
	StateDir string `json:"state_dir,omitempty"`
	// Processes are the processes of its sessions that were still running: in its slice, or
	// anywhere with its marker. They were killed unless the sweep was a dry run.
	Processes []proc.Proc `json:"processes"`
	Removed   bool        `json:"removed"`         // its slice and state directory were removed
	Error     string      `json:"error,omitempty"` // what could not be done

	slice    *cgroup.Slice // its slice, checked (cgroup.Root.Open); nil when there is none to act on
	rootMade []string      // what its record says it made for the root (see cgroup.Root.RemoveMade)
}

// Run finds the instances whose process has died and kills and removes what they left: their slices
// under the root, the processes that carry their marker anywhere, and their state directories. It
// never touches an instance that is alive: an instance is named by its process's pid and start time,
// so a reused pid does not pass for it, and a slice holding processes of another pid namespace is
// left alone. Several instances may sweep at once. The marker scan, which reads the environment of
// every process on the machine, runs only when there is a dead instance.
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
	var rep Report
	dead, err := sw.find(&rep)
	if sw.state != nil {
		defer sw.state.Close()
	}
	errs := []error{err}
	for _, ig := range rep.Ignored {
		opts.Logger.Warn("sweep: left alone", "path", ig.Path, "reason", ig.Reason)
	}
	if len(dead) == 0 {
		return rep, err
	}
	names := slices.Sorted(maps.Keys(dead))
	for _, name := range names {
		errs = append(errs, sw.killSlice(dead[name]))
	}
	errs = append(errs, sw.killMarked(dead))
	for _, name := range names {
		d := dead[name]
		if !opts.DryRun {
			sw.remove(d)
		}
		rep.Dead = append(rep.Dead, *d)
	}
	// Once every slice is gone: what the removed instances made for the root, as long as nothing
	// else uses it (a live instance's slice, or one that could not be removed).
	for _, name := range names {
		if d := dead[name]; d.Removed && sw.root != nil {
			errs = append(errs, sw.root.RemoveMade(d.rootMade))
		}
	}
	return rep, errors.Join(errs...)
}

type sweeper struct {
	opts  Options
	w     *proc.Walker
	k     kill.Policy
	state *safefs.Dir  // the state directory, when there is one to look in
	root  *cgroup.Root // the root looked under, when there is one
}

// find collects the instances under the root and in the state directory (instance.Where.Look), sorts the
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
	if populated, _ := s.Populated(); populated && len(pids) == 0 { // an instance there may be alive
		d.Error = "holds processes of another pid namespace; left alone"
		d.Slice, d.slice = "", nil
		return nil
	}
	for _, p := range pids {
		// A process the kernel is ending stays in cgroup.procs until it leaves the cgroup inside its
		// exit: it no longer runs, and is not listed as left running.
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
	var ended []proc.Proc // killed, or in a dry run those that would be
	switch {
	case sw.opts.DryRun:
		for _, p := range found {
			ended = append(ended, proc.Describe(p.Pid))
		}
	case len(found) > 0:
		ended, _, err = sw.k.Processes(context.Background(), found, time.Now().Add(sw.opts.CloseTimeout))
	}
	for _, q := range ended {
		d := owner[q.Pid]
		if d != nil && !slices.ContainsFunc(d.Processes, func(o proc.Proc) bool { return o.Pid == q.Pid }) {
			d.Processes = append(d.Processes, q)
		}
	}
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
