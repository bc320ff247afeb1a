package reaper

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// SweepOptions configures Sweep. The zero value looks where a Reaper with zero Options keeps its
// instances, and kills what it finds.
type SweepOptions struct {
	// Cgroup names the slice root to look under (see Options.Cgroup). Where it does not exist or
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
	// CloseTimeout bounds the wait for killed processes to disappear; zero means DefaultCloseTimeout.
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
	// Foreign are slices that hold processes of another pid namespace (their pids read as 0): their
	// owner may be alive there, so they are left alone.
	Foreign []string `json:"foreign,omitempty"`
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
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = DefaultCloseTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sw := &sweeper{opts: opts, w: proc.NewWalker(), k: killer{log: opts.Logger, method: cgroup.KillFile, timeout: opts.CloseTimeout}}
	var rep SweepReport
	dead, errs := sw.find(&rep)
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
	opts SweepOptions
	w    *proc.Walker
	k    killer
	root *cgroup.Root
}

// find collects the instances under the root and in the state directory, sorts the live from the
// dead, and leaves out slices it must not touch.
func (sw *sweeper) find(rep *SweepReport) (map[string]*DeadInstance, []error) {
	var errs []error
	dead := make(map[string]*DeadInstance)
	seen := make(map[string]bool)
	consider := func(name string) *DeadInstance {
		if seen[name] {
			return dead[name]
		}
		seen[name] = true
		if _, _, ok := parseInstanceName(name); !ok || name == sw.opts.Skip {
			return nil
		}
		if instanceAlive(sw.w, name) {
			rep.Live = append(rep.Live, name)
			return nil
		}
		dead[name] = &DeadInstance{Name: name}
		return dead[name]
	}
	if root, err := cgroup.LookupRoot(sw.opts.Cgroup); err == nil && !sw.opts.NoCgroup {
		sw.root = root
		names, err := root.Slices()
		if err != nil {
			errs = append(errs, err)
		}
		for _, name := range names {
			if d := consider(name); d != nil {
				d.Slice = filepath.Join(root.Path(), name)
			}
		}
	}
	entries, err := os.ReadDir(sw.opts.StateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), instancePrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if d := consider(name); d != nil {
			d.StateDir = filepath.Join(sw.opts.StateDir, e.Name())
			if in, err := readInstance(d.StateDir); err == nil && d.Slice == "" {
				d.Slice = in.Slice // a slice under another root than the one looked at
			}
		}
	}
	slices.Sort(rep.Live)
	return dead, errs
}

// killSlice kills (or, in a dry run, lists) what is in a dead instance's slice.
func (sw *sweeper) killSlice(d *DeadInstance) error {
	if d.Slice == "" {
		return nil
	}
	s, err := cgroup.OpenSlice(d.Slice)
	if errors.Is(err, unix.ENOENT) {
		d.Slice = ""
		return nil
	}
	if err != nil {
		d.Error = err.Error()
		return err
	}
	pids, err := s.Pids()
	if err != nil {
		d.Error = err.Error()
		return err
	}
	if populated, _ := s.Populated(); populated && len(pids) == 0 {
		// Processes of another pid namespace: an instance there may be alive.
		d.Error = "holds processes of another pid namespace; left alone"
		d.Slice = ""
		return nil
	}
	for _, p := range pids {
		d.Processes = append(d.Processes, proc.Describe(p))
	}
	if sw.opts.DryRun {
		return nil
	}
	left, err := sw.k.slice(s, time.Now().Add(sw.opts.CloseTimeout))
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
	if d.Slice != "" {
		if s, err := cgroup.OpenSlice(d.Slice); err == nil {
			errs = append(errs, s.Remove())
		}
	}
	if d.StateDir != "" {
		errs = append(errs, os.RemoveAll(d.StateDir))
	}
	if err := errors.Join(errs...); err != nil {
		d.Error = err.Error()
		return
	}
	d.Removed = true
}
