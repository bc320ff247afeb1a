package reaper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/smallinit"
	"golang.org/x/sys/unix"
)

// PID namespaces. With them each session's tasks run in a PID namespace of the session's own, whose
// init (internal/pidns) is the small init (internal/smallinit) where the Reaper forks the tasks into
// the namespace itself, else this program in another mode, started on the session's first command from
// a thread that lives as long as the Reaper, with SIGKILL as its parent-death signal. When the init
// dies, by whatever cause (the session's end kills it; the Reaper's death, even by SIGKILL, kills it
// through the parent-death signal), the kernel kills every process in the namespace, and no process
// can leave it: what reaper otherwise does only while it lives, the kernel then does without it. The
// Reaper forks every task of the session into the namespace itself, from its entry thread
// (pidns.Init.Fork), where the probe found that it can enter the namespaces (they are made without a
// user namespace, and their root is the Reaper's); the task is then its child, as without namespaces.
// Otherwise the init starts every task and reports its exit. Outside, everything goes by the pids the
// Reaper sees, as without namespaces.
//
// In cgroup containment the inits are born in a leaf of the Reaper's slice, "inits", beside the
// sessions' slices: the kill of the Reaper's slice (its guard's, a sweep's) reaches them, and a
// session's limits do not count its init (a session at its pids.max would otherwise stop the init's
// runtime from making a thread, which kills it and the whole session; the memory of the init is the
// Reaper's, as the server's is), nor does the session's slice, which the teardown's polite phase waits
// to see empty, hold it. Since no init is born in a session's cgroup, one can be started before the
// session exists: the start-up probe's init serves the first session, and with Options.ReadyInit an
// init is kept ready for each next one (see takeReady).
//
// An init whose namespace has been empty for initIdle (no process of the session left) is ended by
// the Reaper (pidns.Options.Idle), and the session's next command starts a new one: an idle session
// then holds no process of reaper's. A session's processes never notice: the namespace they were in
// was empty. A ready shell (ready_linux.go) is a process of the namespace that holds that clock back;
// the init ends with it when it ends unused after the same period.
//
// Orphans of a session go to its init, not to the Reaper: the init is the walks' root (the Self of
// their queries) for a session with a namespace, and the watch for escapees looks at the children of
// every init too. The tasks the Reaper forked are not below the init: the walks find them as seeds
// (proc.Query.Seeds), as they always did.

// PIDNamespaceInfo says whether sessions get PID namespaces, how, and why.
type PIDNamespaceInfo struct {
	// On: each session's tasks run in a PID namespace of the session's own.
	On bool
	// UserNS: the namespaces are made through an unprivileged user namespace, in which this process's
	// uid and gid are mapped to themselves (tasks see other users' files as nobody's, and set-user-ID
	// programs gain no privilege).
	UserNS bool
	// Proc: the init mounts a /proc of its namespace, so that ps and kill inside see the session only.
	Proc bool
	// Reason says why namespaces are off, or, when on, why /proc could not be mounted.
	Reason string
}

func (p PIDNamespaceInfo) String() string {
	if !p.On {
		return "off (" + p.Reason + ")"
	}
	s := "on (a PID namespace per session"
	if p.UserNS {
		s += ", made through an unprivileged user namespace"
	}
	if !p.Proc {
		s += "; /proc not remounted, tasks' ps shows the host's processes: " + p.Reason
	}
	return s + ")"
}

// startPIDNamespace starts the probe that decides whether and how sessions get PID namespaces, unless
// they are off, and returns at once: the probe (an init's start, about 6-10 ms) runs while the rest of
// the start-up does (the state directory, the MCP server, the client's first request). Whatever needs
// its answer calls pidNamespace, which waits for it: Containment, Instance, a session's first command,
// and Close. With Options.User no user namespace is tried: its uids are not mapped there.
//
// The probe's init is kept for the first session (see takeReady), born, in cgroup containment, in the
// inits' leaf.
func (r *Reaper) startPIDNamespace() error {
	r.nsProbe = make(chan nsProbeResult, 1)
	if r.opts.PIDNamespace == PIDNamespaceOff {
		r.nsProbe <- nsProbeResult{}
		return nil
	}
	var err error
	if r.nsThread, err = reap.StartForker(nil); err != nil {
		return err
	}
	opts := r.initOptions(nil)
	opts.NoUserNS = r.opts.User != nil
	go func() {
		// The result channel is its only output, and pidNamespace (which Close and undoNew call)
		// always receives it: this goroutine's owner waits for it there.
		var res nsProbeResult
		// The entry thread is made while the probe's init starts (its fork, exec and runtime's
		// start), which the probe waits for: off the start-up's path.
		entry := make(chan struct{})
		go func() {
			defer close(entry)
			res.entry, res.entryErr = r.newEntry()
		}()
		if r.instance != nil {
			opts.Cgroup = r.initsFD()
		}
		// The small init serves where the entry does; the probe's init is the first session's.
		var err error
		if res.small, err = smallinit.Load(); err != nil && !errors.Is(err, smallinit.ErrUnsupported) {
			r.log.Debug("the small init cannot be loaded; the inits are this program", "error", err)
		}
		opts.Small = res.small
		res.m, res.ready, res.err = pidns.ProbeKeep(opts)
		if opts.Cgroup != nil {
			opts.Cgroup.Close()
		}
		<-entry
		if res.entry != nil && (res.err != nil || res.m.UserNS) {
			// Nothing to enter, or namespaces owned by a user namespace, which a threaded process
			// cannot enter: the inits start the tasks.
			res.entry.Close()
			res.entry, res.entryErr = nil, errors.New("the namespaces are made through a user namespace")
		}
		r.nsProbe <- res
	}()
	// The probe's init is on the path of the first session's first command; the start-up goes on
	// meanwhile. Yielding runs the goroutine at once, on this thread, up to the fork (where it waits):
	// left for another thread it waited 0.5-0.7 ms here for one to be made and scheduled (ftrace).
	runtime.Gosched()
	return nil
}

// initsLeaf returns the leaf the inits are born in (cgroup containment), making it on the first call.
func (r *Reaper) initsLeaf() (*cgroup.Slice, error) {
	r.initsMu.Lock()
	defer r.initsMu.Unlock()
	if r.inits == nil {
		leaf, err := r.instance.Create("inits")
		if err != nil {
			return nil, err
		}
		r.inits = leaf
	}
	return r.inits, nil
}

// initsFD opens the inits' leaf for an init to be born in, or returns nil if it cannot (the init is
// then born outside, and a session starts its own).
func (r *Reaper) initsFD() *os.File {
	leaf, err := r.initsLeaf()
	if err == nil {
		var f *os.File
		if f, err = leaf.OpenFD(); err == nil {
			return f
		}
	}
	r.log.Debug("the inits' leaf could not be opened ahead", "error", err)
	return nil
}

// nsProbeResult is what the start-up probe found.
type nsProbeResult struct {
	m        pidns.Mode
	ready    *pidns.Init // the init that answered, alive
	err      error
	entry    *pidns.Entry       // the thread that forks tasks into the namespaces, where it can
	entryErr error              // why there is none, if namespaces can be made
	small    *smallinit.Program // the small init, if it could be loaded (the probe's init may be it)
}

// newEntry starts the thread that forks tasks into the sessions' namespaces (pidns.Init.Fork), with
// no_new_privs where tasks run as another user (as the Reaper's forker for them has).
func (r *Reaper) newEntry() (*pidns.Entry, error) {
	var setup func() error
	if r.opts.User != nil {
		setup = setNoNewPrivs
	}
	return pidns.NewEntry(setup)
}

// pidNamespace waits for the start-up probe and applies its answer, once; it returns the error that
// makes New fail (PIDNamespaceOn where namespaces cannot be made). The Reaper's fields it sets
// (info.PIDNamespace, nsThread, ready, self.PIDNamespace) are read only after it has returned.
func (r *Reaper) pidNamespace() error {
	r.nsOnce.Do(func() { r.nsErr = r.decidePIDNamespace(<-r.nsProbe) })
	return r.nsErr
}

// decidePIDNamespace applies the start-up probe's answer.
func (r *Reaper) decidePIDNamespace(p nsProbeResult) error {
	if r.opts.PIDNamespace == PIDNamespaceOff {
		r.info.PIDNamespace.Reason = "off was asked for"
		return nil
	}
	m, ready, err := p.m, p.ready, p.err
	if p.entry != nil {
		defer func() {
			if !r.info.PIDNamespace.On {
				p.entry.Close()
			}
		}()
	}
	if p.small != nil {
		defer func() {
			if r.small == nil {
				p.small.Close()
			}
		}()
	}
	if err != nil {
		r.nsThread.Stop()
		r.nsThread = nil
		if r.opts.PIDNamespace == PIDNamespaceOn {
			return fmt.Errorf("PID namespaces were asked for but cannot be made here: %w", err)
		}
		r.info.PIDNamespace.Reason = err.Error()
		return nil
	}
	if !m.Proc && r.opts.PIDNamespace == PIDNamespaceAuto {
		// Tasks in a namespace whose /proc is the host's would see pids that are not theirs: $$ and
		// $! name other processes in /proc, and ps lists processes they cannot signal. That breaks
		// scripts; only an explicit on accepts it. This is the case in a container whose /proc has
		// masked paths (the kernel then refuses a new proc mount without CAP_SYS_ADMIN in the
		// container's user namespace); the container's own PID namespace still dies with reaper there
		// when reaper is its PID 1.
		r.endInit(ready)
		r.nsThread.Stop()
		r.nsThread = nil
		r.info.PIDNamespace.Reason = "a PID namespace could be made but not a /proc of its own (" + m.Note + "); --pid-namespace=on uses it anyway"
		return nil
	}
	r.info.PIDNamespace = PIDNamespaceInfo{On: true, UserNS: m.UserNS, Proc: m.Proc, Reason: m.Note}
	r.entry, r.entryErr = p.entry, p.entryErr
	if p.entryErr != nil {
		r.log.Debug("the inits start every task: their namespaces cannot be entered", "error", p.entryErr)
	}
	switch {
	case p.small == nil || r.entry == nil:
	case p.small.Err() != nil:
		r.log.Warn("the small init cannot run here; the sessions' inits are this program", "error", p.small.Err())
	default:
		r.small = p.small
	}
	r.recordPIDNamespace()
	switch {
	case ready.Small() && r.entry == nil:
		// It starts no task, and here the inits must.
		r.endInit(ready)
	case r.root != nil && !ready.InCgroup():
		// In cgroup containment an init born outside would have to be moved into the inits' leaf,
		// and moving a running process between cgroups cost more here than starting another init
		// born there: the first call with the move took 17-20 ms against 12 ms without
		// (BenchmarkSessionStart).
		r.endInit(ready)
	default:
		r.ready.Store(ready)
	}
	return nil
}

// recordPIDNamespace notes in the instance's record that sessions get PID namespaces, when the probe
// answered after the record was written (PIDNamespaceAuto); a reader sees the old record or the new.
// The record says so for reaper ps alone: it is rewritten in the background (the Reaper's wg, which
// Close waits for before it removes the state), not on the path of the first command, which waits
// for the probe's answer (on this VM's disk a rewrite took 0.3-0.5 ms).
func (r *Reaper) recordPIDNamespace() {
	r.self.PIDNamespace = true
	if r.dir == nil {
		return // not written yet: it is written with the answer
	}
	self := r.self
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := instance.Rewrite(r.dir, self); err != nil {
			r.log.Warn("recording the PID namespaces in the instance's state failed", "error", err)
		}
	}()
}

// takeReady returns the init started ahead for the next session's first command (the start-up
// probe's, or with Options.ReadyInit the last one made ready), or nil if there is none, or it has
// exited (idle, or killed). Taking it saves the session an init's start (about 5 ms: a fork and exec
// of reaper, its runtime's start, the mounts, the hello); until taken it is a child of the Reaper like
// any init, killed by the parent-death signal if the Reaper dies, and it forks nothing until asked.
//
// With Options.ReadyInit, again reports that the caller is to ask readyInits for the next init
// (askReady) once the command it needs an init for has started, whether it took one or starts its
// own: not at once, where the next init's fork, exec and runtime start would take the CPU from that
// command's start (on a small host, most of a millisecond of its round trip). A session that found
// none asks too: one ready had exited idle (sessions came more than initIdle apart), or another
// session took it while its successor was starting. Without that ask, one such session stopped ready
// inits until the server exited, and every later first command paid for its init's start (1.2-1.5 ms
// of an HTTP session's first call on the VM: BENCHMARKS.md, After 16).
func (r *Reaper) takeReady() (in *pidns.Init, again bool) {
	in = r.ready.Swap(nil)
	if in != nil && (in.Err() != nil || in.Small() && r.entryOff.Load()) {
		r.endInit(in)
		in = nil
	}
	return in, r.wantReady != nil // made with Options.ReadyInit
}

// askReady asks readyInits for an init ready for the next session.
func (r *Reaper) askReady() {
	select {
	case r.wantReady <- struct{}{}:
	default: // asked already
	}
}

// readyInits keeps an init ready for the next session (Options.ReadyInit): it makes one each time a
// session has taken the one there was, until stop is closed. The Reaper's wg counts it; Close ends
// the init it left ready once it has returned.
func (r *Reaper) readyInits(stop <-chan struct{}) {
	defer r.wg.Done()
	for {
		select {
		case <-stop:
			return
		case <-r.wantReady:
		}
		if r.ready.Load() != nil {
			continue
		}
		var leaf *cgroup.Slice
		if r.root != nil {
			var err error
			if r.noClone3.Load() {
				continue // the init would have to be moved: not worth it ahead (see decidePIDNamespace)
			}
			if leaf, err = r.initsLeaf(); err != nil {
				continue // the next session's first command starts its own, and says why it cannot
			}
		}
		in, err := r.startInit(leaf)
		if err != nil {
			r.log.Debug("an init could not be made ready for the next session", "error", err)
			continue
		}
		select {
		case <-stop:
			r.endInit(in)
			return
		default:
		}
		if !r.ready.CompareAndSwap(nil, in) {
			r.endInit(in)
		}
	}
}

// endReady ends the init kept ready, if no session took it.
func (r *Reaper) endReady() {
	if in := r.ready.Swap(nil); in != nil {
		r.endInit(in)
	}
}

// initIdle is how long an init lives on once its namespace is empty. The Go init costs about 3 MB (its
// Pss) to keep, and about 5 ms to start again, which an agent's pause between commands dwarfs; the
// small init a tenth of that.
const initIdle = 10 * time.Second

// initOptions are how the Reaper starts an init, born in cgroup if it is set.
func (r *Reaper) initOptions(cg *os.File) pidns.Options {
	opts := pidns.Options{
		Path: guard.Executable(), Name: "reaper-init", UserNS: r.info.PIDNamespace.UserNS, Cgroup: cg, Stderr: os.Stderr,
		Forker: r.nsThread, Children: r.kids, Timeout: r.lim.CloseTimeout, Idle: r.nsIdle,
	}
	if !r.entryOff.Load() {
		opts.Small = r.small // nil until the probe's answer, and without an entry
	}
	return opts
}

// initLocked returns the session's init, starting it on the session's first command, or when the one
// it had has ended (whatever ended it, the kernel killed its namespace with it). It returns nil
// without namespaces. askReady is set where it took the init kept ready, or started one of its own,
// and the next is to be asked for once the command has started (see takeReady).
func (s *Session) initLocked() (in *pidns.Init, askReady bool, err error) {
	if err := s.r.pidNamespace(); err != nil || !s.r.info.PIDNamespace.On {
		return nil, false, nil
	}
	if s.ns != nil {
		err := s.ns.Err()
		switch {
		case err == nil:
			return s.ns, false, nil
		case errors.Is(err, pidns.ErrIdle):
			s.ns.Close() // it has exited, with nothing left in its namespace
		default:
			s.r.log.Warn("the init of a session's PID namespace has ended, and every process of the namespace with it; a new one starts",
				"session", s.id, "init", s.ns.Pid(), "error", err)
			s.ended = append(s.ended, s.ns)
		}
		s.ns = nil
	}
	in, askReady = s.r.takeReady()
	if in != nil {
		s.ns = in
		return in, askReady, nil
	}
	var leaf *cgroup.Slice
	if s.r.root != nil {
		if leaf, err = s.r.initsLeaf(); err != nil {
			return nil, false, fmt.Errorf("session %s: %w", s.id, err)
		}
	}
	if in, err = s.r.startInit(leaf); err != nil {
		return nil, false, fmt.Errorf("session %s: %w", s.id, err)
	}
	s.ns = in
	return in, askReady, nil
}

// spawnLocked starts spec in the session: through its init, where it has a PID namespace. An init
// that had ended when it was asked (idle, or killed with its namespace before the session noticed)
// started nothing: the request goes to a new one. With Options.ReadyInit, the next init is asked for
// once spec has started (see takeReady).
func (s *Session) spawnLocked(spec spawnSpec) (spawned, error) {
	for attempt := 0; ; attempt++ {
		in, askReady, err := s.initLocked()
		if err != nil {
			return spawned{}, err
		}
		spec.init = in
		sp, err := s.r.spawn(spec)
		if askReady {
			s.r.askReady()
		}
		if attempt == 0 && (errors.Is(err, pidns.ErrEnded) || errors.Is(err, pidns.ErrNoSpawn) && s.dropSmallLocked(in)) {
			continue
		}
		return sp, err
	}
}

// dropSmallLocked ends the session's init, the small one, where entering its namespace failed (the
// task was then asked of the init, which starts none) and the namespace holds nothing, so that the
// next attempt starts an init that does; it reports whether it did. One whose namespace holds
// processes is kept: ending it would kill them.
func (s *Session) dropSmallLocked(in *pidns.Init) bool {
	if s.ns != in || !in.Empty() {
		return false
	}
	s.r.endInit(in)
	s.ns = nil
	return true
}

// startInit starts an init, born in leaf if it is set. Where clone3 into a cgroup is refused, the init
// is started outside and then moved: it forks nothing until it is asked to, and it is asked only
// after the move.
func (r *Reaper) startInit(leaf *cgroup.Slice) (*pidns.Init, error) {
	if leaf == nil {
		return pidns.Start(r.initOptions(nil))
	}
	if !r.noClone3.Load() {
		f, err := leaf.OpenFD()
		if err != nil {
			return nil, err
		}
		in, err := pidns.Start(r.initOptions(f))
		f.Close()
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return in, err
		}
		if r.noClone3.CompareAndSwap(false, true) {
			r.log.Warn("clone3 into a cgroup is refused; tasks will join their cgroup before exec", "error", err)
		}
	}
	in, err := pidns.Start(r.initOptions(nil))
	if err != nil {
		return nil, err
	}
	if err := leaf.Add(in.Pid()); err != nil {
		r.endInit(in)
		return nil, fmt.Errorf("move the init %d into %s: %w", in.Pid(), leaf.Path(), err)
	}
	return in, nil
}

// endInit kills an init and lets go of it, waiting (bounded) for its namespace to be gone.
func (r *Reaper) endInit(in *pidns.Init) {
	in.Kill()
	in.Wait(context.Background(), time.Now().Add(r.lim.CloseTimeout))
	in.Close()
}

// forkInit starts spec through the session's init (spec.init). Its descriptors go along; the pid,
// start time and pidfd come back as the Reaper sees them.
func (r *Reaper) forkInit(spec spawnSpec, intoCgroup bool) (spawned, error) {
	fds, err := spec.fds(r.devnull)
	if err != nil {
		return spawned{}, err
	}
	req := pidns.Request{
		Argv: spec.argv, Env: spec.env, Dir: spec.dir, FDs: fds, Foreground: spec.foreground, Ctty: 0,
		Setpgid: !spec.tty, Setsid: spec.tty, Setctty: spec.tty, // Ctty 0: the terminal is its stdin
	}
	if r.opts.User != nil {
		req.Credential = r.opts.User.credential()
	}
	if intoCgroup {
		f, err := spec.leaf.OpenFD()
		if err != nil {
			return spawned{}, err
		}
		defer f.Close()
		req.Cgroup = f
	}
	t, err := spec.init.Spawn(req)
	if err != nil {
		return spawned{}, fmt.Errorf("start %s in %s: %w", spec.argv[0], spec.dir, err)
	}
	return spawned{pid: t.Pid, start: t.Start, pidfd: t.PidFD, exited: t.Exited}, nil
}

// walkRoot returns the process below which the session's processes are found (the walks' Self), and
// the task processes below it that each belong to a task of their own (their Skip): the session's
// init and the tasks it reports, or the Reaper and its registered children. in is the init, if any.
func (s *Session) walkRoot() (self int, skip map[int]bool, in *pidns.Init) {
	if in = s.currentInit(); in != nil {
		return in.Pid(), in.Registered(), in
	}
	return s.r.pid, s.r.kids.Registered(), nil
}

// currentInit returns the session's init, nil before its first command or without namespaces.
func (s *Session) currentInit() *pidns.Init {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ns
}

// sessionQuery is the query for every process of the session: below its init, everything (the init
// seeds it, and is known, so not reported); without one, what carries the marker or descends from
// seeds, which it may add to.
func (s *Session) sessionQuery(seeds map[int]uint64) proc.Query {
	self, skip, in := s.walkRoot()
	q := proc.Query{Self: self, Seeds: seeds, Skip: skip, Marker: s.marker}
	if in != nil {
		if q.Seeds == nil {
			q.Seeds = make(map[int]uint64)
		}
		q.Seeds[self] = in.StartTime()
		q.Known = map[int]bool{self: true}
	}
	return q
}
