package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// PID namespaces (the package documentation says what they promise). A session's init is started on
// its first command from a thread that lives as long as the Reaper, with SIGKILL as its parent-death
// signal, so that the kernel kills the namespace whatever kills the Reaper. The init starts every
// task of the session and reports its exit. The Reaper's initPool decides once (the start-up probe)
// whether and how sessions get namespaces, and starts inits; each session's sessionNS holds the init
// its next task starts in and those that ended meanwhile, which its teardown takes. Neither holds
// Session.mu: an init's start, and a spawn through it, run under spawnMu alone.
//
// In cgroup containment the inits are born in a leaf "inits" of the Reaper's slice: the kill of the
// Reaper's slice reaches them, and neither a session's limits nor its slice (which the teardown waits
// to see empty) count them; at its pids.max a session would otherwise kill its own init.
//
// An init whose namespace has been empty for initIdle is ended (pidns.Options.Idle), and the
// session's next command starts a new one: an idle session holds no process of reaper's. A ready
// shell holds that clock back, and the init ends with it when it ends unused (ready_linux.go).
//
// Orphans of a session go to its init, which is the walks' root (their Self) for a session with a
// namespace; the watch for escapees looks at the children of every init too.

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
	// Terminals: the init mounts a devpts instance of the session's own on its /dev/pts, where the
	// session's terminals are made: no other session can open them.
	Terminals bool
	// PrivateTmp: the init mounts a tmpfs of the session's own on /tmp and /dev/shm
	// (Options.PrivateTmp).
	PrivateTmp bool
	// Reason says why namespaces are off, or, when on, why one of the init's mounts failed.
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
	if p.PrivateTmp {
		s += ", with a private /tmp"
	}
	switch {
	case !p.Proc:
		s += "; /proc not remounted, tasks' ps shows the host's processes: " + p.Reason
	case !p.Terminals:
		s += "; terminals in the host's /dev/pts: " + p.Reason
	}
	return s + ")"
}

// initIdle is how long an init lives on once its namespace is empty. An init costs about 1 MB of
// memory of its own to keep (see internal/pidns) and a few milliseconds to start again, which an
// agent's pause between commands dwarfs.
const initIdle = 10 * time.Second

// initPool is the Reaper's side of PID namespaces: the start-up probe and what it decided, the thread
// inits are forked from, and the leaf they are born in (cgroup containment). Its methods are safe for
// concurrent use; those that start inits are called only once wait has said that namespaces are on.
type initPool struct {
	// The fields up to probe are fixed at creation.
	log      *slog.Logger
	kids     *reap.Children
	mode     PIDNamespace
	tmp      bool                   // Options.PrivateTmp
	timeout  time.Duration          // an init's start and answers; its end
	instance *cgroup.Slice          // the Reaper's slice, where the inits' leaf is made; nil in process containment
	noClone3 *atomic.Bool           // the Reaper's: clone3 into a cgroup is refused here
	idle     time.Duration          // pidns.Options.Idle: initIdle (tests shorten it before the first session)
	decided  func(PIDNamespaceInfo) // called once with decide's answer, before wait returns

	probe  chan probeResult // the start-up probe's answer, received once by decide
	once   sync.Once        // wait's
	err    error            // decide's error, set under once
	thread *reap.Forker     // the thread inits are forked from (their parent-death signal); nil when off
	info   PIDNamespaceInfo // set by decide, read once wait has returned
	wg     sync.WaitGroup   // the probe

	// leafMu guards leaf: the leaf the inits are born in (cgroup containment), once made. A leaf lock.
	leafMu sync.Mutex
	leaf   *cgroup.Slice
}

// probeResult is what the start-up probe found.
type probeResult struct {
	m   pidns.Mode
	err error
}

// newInitPool starts the probe that decides whether and how sessions get PID namespaces, unless they
// are off, and returns at once: the probe (an init's start) runs while the rest of the start-up does
// (the state directory, the MCP server, the client's first request). wait waits for its answer.
func (r *Reaper) newInitPool() (*initPool, error) {
	p := &initPool{
		log: r.log, kids: r.kids, mode: r.opts.PIDNamespace, tmp: r.opts.PrivateTmp, timeout: r.lim.CloseTimeout,
		instance: r.instance, noClone3: &r.noClone3, idle: initIdle, decided: r.pidNamespaceDecided,
		probe: make(chan probeResult, 1),
	}
	if p.mode == PIDNamespaceOff {
		p.probe <- probeResult{}
		return p, nil
	}
	var err error
	if p.thread, err = reap.StartForker(nil); err != nil {
		return nil, err
	}
	opts := p.options(nil)
	opts.NoUserNS = r.opts.User != nil // its ids would not be mapped
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		var res probeResult
		res.m, res.err = pidns.Probe(opts)
		p.probe <- res
	}()
	return p, nil
}

// wait waits for the start-up probe and applies its answer, once (decide), and returns the error that
// makes New fail (PIDNamespaceOn where namespaces cannot be made). What it decided is in info from
// then on.
func (p *initPool) wait() error {
	p.once.Do(func() {
		p.err = p.decide()
		p.decided(p.info)
	})
	return p.err
}

// on waits for the probe's answer and reports whether sessions get PID namespaces.
func (p *initPool) on() bool { return p.wait() == nil && p.info.On }

// decide waits for the start-up probe and applies its answer.
func (p *initPool) decide() error {
	res := <-p.probe
	if p.mode == PIDNamespaceOff {
		p.info.Reason = "off was asked for"
		return nil
	}
	defer func() {
		if !p.info.On {
			p.thread.Stop()
			p.thread = nil
		}
	}()
	if res.err != nil {
		switch {
		case p.mode == PIDNamespaceOn:
			return fmt.Errorf("PID namespaces were asked for but cannot be made here: %w", res.err)
		case p.tmp:
			return fmt.Errorf("a private /tmp needs PID namespaces, which cannot be made here: %w", res.err)
		}
		p.info.Reason = res.err.Error()
		return nil
	}
	if !res.m.Proc && p.mode == PIDNamespaceAuto {
		// Tasks in a namespace whose /proc is the host's would see pids that are not theirs ($$, $!,
		// ps), which breaks scripts; only an explicit on accepts it. This is the case in a container
		// whose /proc has masked paths (see docs/containment.md).
		p.info.Reason = "a PID namespace could be made but not a /proc of its own (" + res.m.Note + "); --pid-namespace=on uses it anyway"
		if p.tmp {
			return errors.New("a private /tmp needs PID namespaces, which are off: " + p.info.Reason)
		}
		return nil
	}
	if p.tmp && !res.m.PrivateTmp {
		return fmt.Errorf("a private /tmp cannot be made here: %s", res.m.Note)
	}
	p.info = PIDNamespaceInfo{On: true, UserNS: res.m.UserNS, Proc: res.m.Proc, Terminals: res.m.Devpts, PrivateTmp: res.m.PrivateTmp, Reason: res.m.Note}
	return nil
}

// close stops the thread inits are forked from: every init has ended by then (the sessions'
// teardowns ended theirs).
func (p *initPool) close() {
	p.wait() // the probe ends before what it could touch is let go of
	p.wg.Wait()
	if p.thread != nil {
		p.thread.Stop()
	}
}

// options are how the pool starts an init, born in cg if it is set.
func (p *initPool) options(cg *os.File) pidns.Options {
	return pidns.Options{
		Path: guard.Executable(), Name: "reaper-init", UserNS: p.info.UserNS, Cgroup: cg, Stderr: os.Stderr,
		Forker: p.thread, Children: p.kids, Timeout: p.timeout, Idle: p.idle, IPC: true, PrivateTmp: p.tmp,
	}
}

// initsLeaf returns the leaf the inits are born in (cgroup containment), making it on the first call.
func (p *initPool) initsLeaf() (*cgroup.Slice, error) {
	p.leafMu.Lock()
	defer p.leafMu.Unlock()
	if p.leaf == nil {
		leaf, err := p.instance.Create("inits")
		if err != nil {
			return nil, err
		}
		p.leaf = leaf
	}
	return p.leaf, nil
}

// start starts an init: born in the inits' leaf in cgroup containment. Where clone3 into a cgroup is
// refused, the init is started outside and then moved: it forks nothing until it is asked to, and it
// is asked only after the move.
func (p *initPool) start() (*pidns.Init, error) {
	if p.instance == nil {
		return pidns.Start(p.options(nil))
	}
	leaf, err := p.initsLeaf()
	if err != nil {
		return nil, err
	}
	if !p.noClone3.Load() {
		f, err := leaf.OpenFD()
		if err != nil {
			return nil, err
		}
		in, err := pidns.Start(p.options(f))
		f.Close()
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return in, err
		}
		if p.noClone3.CompareAndSwap(false, true) {
			p.log.Warn("clone3 into a cgroup is refused; tasks will join their cgroup before exec", "error", err)
		}
	}
	in, err := pidns.Start(p.options(nil))
	if err != nil {
		return nil, err
	}
	if err := leaf.Add(in.Pid()); err != nil {
		p.end(in)
		return nil, fmt.Errorf("move the init %d into %s: %w", in.Pid(), leaf.Path(), err)
	}
	return in, nil
}

// end kills an init and lets go of it, waiting (bounded) for its namespace to be gone.
func (p *initPool) end(in *pidns.Init) {
	in.Kill()
	in.Wait(context.Background(), time.Now().Add(p.timeout))
	in.Close()
}

// sessionNS is the PID namespaces one session uses: the init of the namespace its next task starts
// in, and those that ended while the session went on (a task killed its init, or it ended idle with
// a successor started since), which its teardown lets go of. Its methods are safe for concurrent
// use. Its locks are in the package's lock order.
type sessionNS struct {
	// The fields up to startMu are fixed at creation.
	pool    *initPool
	session string // the session's id, for the log
	startMu sync.Mutex

	// mu guards the fields that follow.
	mu     sync.Mutex
	cur    *pidns.Init   // the init tasks start in; nil before the first task, or after it ended
	ended  []*pidns.Init // inits that ended while the session went on
	closed bool          // the teardown took them: no init starts any more
}

// use runs fn with the init the session's next task starts in: its current one, or a new one where it
// has none or the one it had has ended (whatever ended it, the kernel killed its namespace with it).
// fn gets nil without namespaces. An init that had ended when fn asked it (idle, or killed with its
// namespace before the session noticed) started nothing, and fn is run again, once, with a new one:
// it must undo what it did before it returns such an error.
func (sn *sessionNS) use(fn func(in *pidns.Init) error) error {
	if !sn.pool.on() {
		return fn(nil)
	}
	sn.startMu.Lock()
	defer sn.startMu.Unlock()
	for attempt := 0; ; attempt++ {
		in, err := sn.initLocked()
		if err != nil {
			return err
		}
		err = fn(in)
		if attempt == 0 && errors.Is(err, pidns.ErrEnded) {
			continue
		}
		return err
	}
}

// initLocked returns the session's current init, starting one where it has none (see use). startMu
// is held.
func (sn *sessionNS) initLocked() (*pidns.Init, error) {
	sn.mu.Lock()
	cur, closed := sn.cur, sn.closed
	sn.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("session %s: %w", sn.session, ErrSessionClosed)
	}
	if cur != nil {
		err := cur.Err()
		if err == nil {
			return cur, nil
		}
		sn.mu.Lock()
		sn.cur = nil
		if !errors.Is(err, pidns.ErrIdle) {
			sn.ended = append(sn.ended, cur)
		}
		sn.mu.Unlock()
		if errors.Is(err, pidns.ErrIdle) {
			cur.Close() // it has exited, with nothing left in its namespace
		} else {
			sn.pool.log.Warn("the init of a session's PID namespace has ended, and every process of the namespace with it; a new one starts",
				"session", sn.session, "init", cur.Pid(), "error", err)
		}
	}
	in, err := sn.pool.start()
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", sn.session, err)
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.closed { // the teardown came meanwhile: it has taken what it would end
		sn.pool.end(in)
		return nil, fmt.Errorf("session %s: %w", sn.session, ErrSessionClosed)
	}
	sn.cur = in
	return in, nil
}

// current returns the session's init, nil before its first command, after it ended idle, or without
// namespaces.
func (sn *sessionNS) current() *pidns.Init {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.cur
}

// live returns the session's init while the session has not handed its inits to its teardown (see
// close): nil once it has, before its first command, after it ended idle, or without namespaces.
func (sn *sessionNS) live() *pidns.Init {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.closed {
		return nil
	}
	return sn.cur
}

// close hands the teardown every init the session has (its current one last, if any) and starts no
// more. It is called once the session starts no task any more.
func (sn *sessionNS) close() (cur *pidns.Init, all []*pidns.Init) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	sn.closed = true
	all = append(all, sn.ended...)
	if sn.cur != nil {
		all = append(all, sn.cur)
	}
	return sn.cur, all
}

// walkRoot returns the process below which the session's processes are found (the walks' Self), and
// the task processes below it that each belong to a task of their own (their Skip): the session's
// init and the tasks it reports, or the Reaper and its registered children. in is the init, if any.
func (s *Session) walkRoot() (self int, skip map[int]bool, in *pidns.Init) {
	if in = s.ns.current(); in != nil {
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

// checkTmpDir refuses dir as a session's working directory where sessions get a private /tmp and it
// is below /tmp or /dev/shm: its tasks would find another directory there, or none.
func (r *Reaper) checkTmpDir(dir string) error {
	if !r.opts.PrivateTmp {
		return nil
	}
	for _, tmp := range []string{"/tmp", "/dev/shm"} {
		if dir == tmp || strings.HasPrefix(dir, tmp+"/") {
			return fmt.Errorf("%w: the working directory %s is below %s, which each session has a private one of (Options.PrivateTmp)", ErrBadInput, dir, tmp)
		}
	}
	return nil
}

// pidNamespaceDecided applies what the start-up probe decided to the Reaper (initPool.decided). Where
// sessions get PID namespaces and the record was written before the answer, the record (for reaper
// ps) is rewritten to say so, in the background (the Reaper's wg), not on the path of the first
// command; a reader sees the old record or the new.
func (r *Reaper) pidNamespaceDecided(info PIDNamespaceInfo) {
	r.info.PIDNamespace = info
	r.self.PIDNamespace = info.On
	if !info.On || r.dir == nil {
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
