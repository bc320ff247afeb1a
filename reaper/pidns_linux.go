package reaper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// PID namespaces. With them each session's tasks run in a PID namespace of the session's own, whose
// init is this program in another mode (internal/pidns), started on the session's first command from
// a thread that lives as long as the Reaper, with SIGKILL as its parent-death signal. When the init
// dies, by whatever cause (the session's end kills it; the Reaper's death, even by SIGKILL, kills it
// through the parent-death signal), the kernel kills every process in the namespace, and no process
// can leave it: what reaper otherwise does only while it lives, the kernel then does without it. The
// init starts every task of the session and reports its exit; outside, everything goes by the pids
// the Reaper sees, as without namespaces.
//
// In cgroup containment the init is born in a leaf of its own, "init-<session>", beside the session's
// slice in the Reaper's slice: the kill of the Reaper's slice (its guard's, a sweep's) reaches it, and
// the session's limits do not count it (a session at its pids.max would otherwise stop the init's
// runtime from making a thread, which kills it and the whole session; the memory of the init is the
// Reaper's, as the server's is), nor does the session's slice, which the teardown's polite phase waits
// to see empty, hold it.
//
// An init whose namespace has been empty for initIdle (no process of the session left) exits, and the
// session's next command starts a new one: an idle session then holds no process of reaper's. A
// session's processes never notice: the namespace they were in was empty.
//
// Orphans of a session go to its init, not to the Reaper: the init is the walks' root (the Self of
// their queries) for a session with a namespace, and the watch for escapees looks at the children of
// every init too.

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
// The probe's init is kept for the first session (see takeSpare). In cgroup containment it is born
// in that session's init leaf, made here ahead of the session: moving a running init into a cgroup
// costs more than starting another there (see decidePIDNamespace), and the leaf's name is known
// ahead, the first session's being always SessionName(1).
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
	opts.UserNS = r.opts.User == nil
	go func() {
		// The result channel is its only output, and pidNamespace (which Close and undoNew call)
		// always receives it: this goroutine's owner waits for it there.
		res := nsProbeResult{session: instance.SessionName(1)}
		if r.instance != nil {
			res.leaf, opts.Cgroup = r.firstInitLeaf(res.session)
		}
		res.m, res.spare, res.err = pidns.ProbeKeep(opts)
		if opts.Cgroup != nil {
			opts.Cgroup.Close()
		}
		r.nsProbe <- res
	}()
	return nil
}

// firstInitLeaf makes the init leaf of the session named session, and opens it for an init to be born
// in; it returns nils if either fails (the probe's init is then born outside, and not kept).
func (r *Reaper) firstInitLeaf(session string) (*cgroup.Slice, *os.File) {
	leaf, err := r.instance.Create("init-" + session)
	if err != nil {
		r.log.Debug("the first session's init leaf could not be made ahead", "error", err)
		return nil, nil
	}
	f, err := leaf.OpenFD()
	if err != nil {
		r.log.Debug("the first session's init leaf could not be opened", "error", err)
		r.dropLeaf(leaf)
		return nil, nil
	}
	return leaf, f
}

// dropLeaf removes an init leaf that no session took; its init, if any, has ended.
func (r *Reaper) dropLeaf(leaf *cgroup.Slice) {
	if leaf == nil {
		return
	}
	if err := leaf.Remove(); err != nil {
		r.log.Warn("removing an unused init leaf failed", "error", err)
	}
}

// nsProbeResult is what the start-up probe found.
type nsProbeResult struct {
	m       pidns.Mode
	spare   *pidns.Init
	err     error
	session string        // the session its init is kept for: the first
	leaf    *cgroup.Slice // that session's init leaf, made ahead (cgroup containment), or nil
}

// spareInit is the start-up probe's init, kept for a first session.
type spareInit struct {
	in *pidns.Init
	// leaf, in cgroup containment, is the init leaf of the session named session, where in was born:
	// only that session may take it. Without cgroups leaf is nil, and the first session to start a
	// command takes in.
	leaf    *cgroup.Slice
	session string
}

// pidNamespace waits for the start-up probe and applies its answer, once; it returns the error that
// makes New fail (PIDNamespaceOn where namespaces cannot be made). The Reaper's fields it sets
// (info.PIDNamespace, nsThread, spare, self.PIDNamespace) are read only after it has returned.
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
	m, spare, err := p.m, p.spare, p.err
	if err != nil {
		r.dropLeaf(p.leaf)
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
		r.endInit(spare)
		r.dropLeaf(p.leaf)
		r.nsThread.Stop()
		r.nsThread = nil
		r.info.PIDNamespace.Reason = "a PID namespace could be made but not a /proc of its own (" + m.Note + "); --pid-namespace=on uses it anyway"
		return nil
	}
	r.info.PIDNamespace = PIDNamespaceInfo{On: true, UserNS: m.UserNS, Proc: m.Proc, Reason: m.Note}
	r.recordPIDNamespace()
	if r.root == nil {
		r.spare.Store(&spareInit{in: spare})
		return nil
	}
	if p.leaf == nil || !spare.InCgroup() {
		// In cgroup containment an init born outside would have to be moved into the session's
		// leaf, and moving a running process between cgroups cost more here than starting another
		// init born in its leaf: the first call with the move took 17-20 ms against 12 ms without
		// (BenchmarkSessionStart).
		r.endInit(spare)
		r.dropLeaf(p.leaf)
		return nil
	}
	r.spare.Store(&spareInit{in: spare, leaf: p.leaf, session: p.session})
	return nil
}

// recordPIDNamespace notes in the instance's record that sessions get PID namespaces, when the probe
// answered after the record was written (PIDNamespaceAuto); a reader sees the old record or the new.
func (r *Reaper) recordPIDNamespace() {
	r.self.PIDNamespace = true
	if r.dir == nil {
		return // not written yet: it is written with the answer
	}
	if err := instance.Rewrite(r.dir, r.self); err != nil {
		r.log.Warn("recording the PID namespaces in the instance's state failed", "error", err)
	}
}

// takeSpare returns, for the session named session, the start-up probe's init and, in cgroup
// containment, the init leaf it was born in: the session's, made ahead. In cgroup containment only
// the session the leaf is named for takes them; otherwise the first session to start a command takes
// the init. The init is nil if it is gone (taken, or exited idle); the leaf is the session's
// whatever became of the init. Taking the init saves the session an init's start (about 6 ms: a fork
// and exec of reaper, its runtime's start, the mounts, the hello); until taken it is a child of the
// Reaper like any init, killed by the parent-death signal if the Reaper dies, and it forks nothing
// until asked.
func (r *Reaper) takeSpare(session string) (*pidns.Init, *cgroup.Slice) {
	sp := r.spare.Load()
	if sp == nil || sp.leaf != nil && sp.session != session || !r.spare.CompareAndSwap(sp, nil) {
		return nil, nil
	}
	if sp.in.Err() != nil {
		r.endInit(sp.in) // it exited idle
		return nil, sp.leaf
	}
	return sp.in, sp.leaf
}

// endSpare ends the start-up probe's init, and removes its leaf, if no session took them.
func (r *Reaper) endSpare() {
	if sp := r.spare.Swap(nil); sp != nil {
		r.endInit(sp.in)
		r.dropLeaf(sp.leaf)
	}
}

// endSpareOf ends the start-up probe's init and its leaf if they are kept for the session named
// session, which ends without having used them.
func (r *Reaper) endSpareOf(session string) {
	if sp := r.spare.Load(); sp != nil && sp.leaf != nil && sp.session == session && r.spare.CompareAndSwap(sp, nil) {
		r.endInit(sp.in)
		r.dropLeaf(sp.leaf)
	}
}

// initIdle is how long an init lives on once its namespace is empty. It costs about 3 MB (its Pss) to
// keep, and about 5 ms to start again, which an agent's pause between commands dwarfs.
const initIdle = 10 * time.Second

// initOptions are how the Reaper starts an init, born in cgroup if it is set.
func (r *Reaper) initOptions(cg *os.File) pidns.Options {
	return pidns.Options{
		Path: proc.Executable(), Name: "reaper-init", UserNS: r.info.PIDNamespace.UserNS, Cgroup: cg, Stderr: os.Stderr,
		Forker: r.nsThread, Children: r.kids, Timeout: r.lim.CloseTimeout, Idle: r.nsIdle,
	}
}

// initLocked returns the session's init, starting it on the session's first command, or when the one
// it had has ended (whatever ended it, the kernel killed its namespace with it). It returns nil
// without namespaces.
func (s *Session) initLocked() (*pidns.Init, error) {
	if err := s.r.pidNamespace(); err != nil || !s.r.info.PIDNamespace.On {
		return nil, nil
	}
	if s.ns != nil {
		err := s.ns.Err()
		switch {
		case err == nil:
			return s.ns, nil
		case errors.Is(err, pidns.ErrIdle):
			s.ns.Close() // it has exited, with nothing left in its namespace
		default:
			s.r.log.Warn("the init of a session's PID namespace has ended, and every process of the namespace with it; a new one starts",
				"session", s.id, "init", s.ns.Pid(), "error", err)
			s.ended = append(s.ended, s.ns)
		}
		s.ns = nil
	}
	if s.nsLeaf == nil {
		in, leaf := s.r.takeSpare(s.name)
		s.nsLeaf = leaf
		if in != nil {
			s.ns = in
			return in, nil
		}
	}
	if s.r.root != nil && s.nsLeaf == nil {
		leaf, err := s.r.instance.Create("init-" + s.name)
		if err != nil {
			return nil, err
		}
		s.nsLeaf = leaf
	}
	in, err := s.r.startInit(s.nsLeaf)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	s.ns = in
	return in, nil
}

// spawnLocked starts spec in the session: through its init, where it has a PID namespace. An init
// that ended idle before it took the request started nothing: the request goes to a new one.
func (s *Session) spawnLocked(spec spawnSpec) (spawned, error) {
	for attempt := 0; ; attempt++ {
		in, err := s.initLocked()
		if err != nil {
			return spawned{}, err
		}
		spec.init = in
		sp, err := s.r.spawn(spec)
		if attempt == 0 && errors.Is(err, pidns.ErrIdle) {
			continue
		}
		return sp, err
	}
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
	s.mu.Lock()
	in = s.ns
	s.mu.Unlock()
	if in != nil {
		return in.Pid(), in.Registered(), in
	}
	return s.r.pid, s.r.kids.Registered(), nil
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
