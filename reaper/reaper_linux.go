package reaper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/safefs"
	"github.com/cgreaper/reaper/internal/shell"
	"github.com/cgreaper/reaper/internal/spare"
	"github.com/cgreaper/reaper/internal/sweep"
	"github.com/cgreaper/reaper/internal/taskout"
	"golang.org/x/sys/unix"
)

// Reaper owns every process the program starts. Create one with New, and Close it before exit.
// The lock order is in the package documentation.
type Reaper struct {
	// The fields up to mu are fixed at creation.
	opts      Options
	lim       Limits
	log       *slog.Logger
	pid       int
	kids      *reap.Children
	devnull   *os.File
	shell     string
	dupCwd    bool // the shell names shell.CwdFD itself (see shell.Script)
	bash      bool // the shell is bash (see shell.Script)
	env       []string
	workDir   string
	info      ContainmentInfo
	root      *cgroup.Root    // nil in process containment
	name      string          // r<pid>-<start time>: this Reaper among others, past and present
	instance  *cgroup.Slice   // this Reaper's slice below root (named name), holding the sessions' slices
	self      instance.Record // what this Reaper recorded in its state directory
	state     *safefs.Dir     // where instances keep their state directories (Options.StateDir)
	dir       *safefs.Dir     // this Reaper's state directory in state, holding its sessions' directories
	outputs   *taskout.Pool   // the budget of every session's output files together (Limits.TotalOutputBudget)
	policy    kill.Policy
	forker    *reap.Forker   // with Options.User: the thread tasks are forked from (no_new_privs)
	pool      *initPool      // the sessions' PID namespaces: whether they get them, their inits
	keepShell bool           // sessions keep a ready shell: the shell is bash, and not Options.NoReadyShell
	shellIdle time.Duration  // how long a ready shell waits for a command: readyShellIdle (tests shorten it)
	obs       Observer       // never nil
	limits    cgroup.Limits  // written into each session's slice: the limits the host can apply
	watchHits bool           // slices have limits: what a task ran into is read as it starts and ends
	noClone3  atomic.Bool    // the host refused clone3 into a cgroup once: join before exec instead
	direct    atomic.Bool    // a task was started outside a PID namespace: orphans may come to the Reaper (see adopters)
	wg        sync.WaitGroup // the sweep after dead instances, the watch for escapees, the record's rewrite
	adoptMu   sync.Mutex     // the escapee checks take turns (kill.Escapees.Turns)
	spare     *spare.Reserve // descriptors in reserve for the kills (kill.Policy.Spare)
	// nsLevel is the depth of this process's PID namespace below /proc's: a session's pid is a
	// process's NSpid entry there (Session.sessionPid).
	nsLevel int
	// stopWatch stops the watch for escapees (cgroup containment); Close closes it.
	stopWatch chan struct{}

	// dropMu guards the field that follows, and serialises the removal of the slice and the state
	// directory, which Close (or a failed New) and Abandon both do; it is never held with mu.
	dropMu      sync.Mutex
	stateClosed bool // state and dir are closed: Abandon must not use them

	// mu guards the fields that follow.
	mu       sync.Mutex
	sessions map[*Session]bool
	ended    ended // what the sessions that ended used
	seq      int
	closing  bool
	done     chan struct{} // closed when Close has finished
	closeErr error
}

// ContainmentInfo says how a Reaper contains processes, and why.
type ContainmentInfo struct {
	// Mode is ContainCgroup or ContainProcess.
	Mode Containment
	// Cgroup is what was detected (also in process containment, where it says why cgroups are not
	// used).
	Cgroup cgroup.Info
	// Slice is the Reaper's own slice, under which every session's slice is created; empty in
	// process containment.
	Slice string
	// Limits are the per-session limits in effect: Options.SessionLimits less those the host
	// cannot apply (see Options.SessionLimits).
	Limits cgroup.Limits
	// LimitsDropped says which limits were asked for and are not applied, and why; empty when all
	// are.
	LimitsDropped string
	// PIDNamespace says whether each session has a PID namespace of its own, and why.
	PIDNamespace PIDNamespaceInfo
	// Scope is the delegated transient scope systemd started for this Reaper, which moved there
	// because it could not take its own cgroup over (a cgroup it shares with its client, a login
	// session's scope that is root's); ScopeManager names who started it ("systemd's user
	// manager"). Both are empty when the Reaper stayed where it was started.
	Scope, ScopeManager string
	// NoScope says why there is no such scope where one was wanted (no systemd answered, say);
	// the reasons for process containment and for limits not applied end with it.
	NoScope string
}

func (c ContainmentInfo) String() string {
	if c.Mode == ContainCgroup && c.Scope != "" {
		return fmt.Sprintf("cgroup (in the delegated scope %s, asked of %s; %s; sessions under %s)", c.Scope, c.ScopeManager, c.Cgroup, c.Slice)
	}
	if c.Mode == ContainCgroup {
		return fmt.Sprintf("cgroup (%s; sessions under %s)", c.Cgroup, c.Slice)
	}
	why := c.Cgroup.Reason
	if why == "" {
		why = "requested"
	}
	return "process (process groups, environment marker, subreaper and /proc walk; cgroups not used: " + why + ")"
}

// spareDescriptors is how many descriptors a Reaper keeps in reserve for its kills: a teardown needs
// two or three at once (a pidfd and a read of /proc; a cgroup file), and eight sessions close at once
// when the Reaper does.
const spareDescriptors = 32

// New makes this process a child subreaper, starts the child reaper and decides the containment
// mode. Only one Reaper may exist in a process at a time.
func New(opts Options) (*Reaper, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return reap.Claim(func() (*Reaper, error) { return newReaper(opts) })
}

func newReaper(opts Options) (*Reaper, error) {
	r := &Reaper{
		opts: opts, lim: opts.limits(), log: opts.Logger, pid: os.Getpid(), env: baseEnv(opts.Env),
		sessions: make(map[*Session]bool), done: make(chan struct{}), stopWatch: make(chan struct{}),
		shellIdle: readyShellIdle,
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.obs = opts.Observer; r.obs == nil {
		r.obs = nopObserver{}
	}
	r.spare = spare.New(spareDescriptors)
	r.policy = kill.Policy{Log: r.log, Method: cgroup.KillFile, Grace: r.lim.Grace, Timeout: r.lim.CloseTimeout, Spare: r.spare}
	// What New made before it failed is undone here, whichever step failed.
	ok := false
	defer func() {
		if !ok {
			r.undoNew()
		}
	}()
	var err error
	if r.shell, err = shell.Find(opts.Shell); err != nil {
		return nil, err
	}
	r.dupCwd, r.bash = shell.NamesHighFDs(r.shell), shell.Name(r.shell) == "bash"
	r.keepShell = r.bash && !opts.NoReadyShell
	// Both absolute: a session's init, which starts its tasks, has a working directory of its own.
	if r.shell, err = filepath.Abs(r.shell); err != nil {
		return nil, fmt.Errorf("shell %s: %w", r.shell, err)
	}
	if r.workDir, err = filepath.Abs(opts.WorkDir); err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	if err := r.checkTmpDir(r.workDir); err != nil {
		return nil, err
	}
	if opts.User != nil {
		r.env = userEnv(r.env, opts.User)
		if r.forker, err = reap.StartForker(setNoNewPrivs); err != nil {
			return nil, err
		}
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become child subreaper: %w", err)
	}
	w := proc.NewWalker()
	st, _ := w.Stat(r.pid)
	r.name = instance.Name(r.pid, st.Start)
	r.nsLevel = max(len(w.NSPids(r.pid)), 1)
	if err := r.contain(); err != nil {
		return nil, err
	}
	r.kids = reap.NewChildren()
	if r.pool, err = r.newInitPool(); err != nil {
		return nil, err
	}
	if r.opts.PIDNamespace == PIDNamespaceOn || r.opts.PrivateTmp {
		// Where namespaces are required (a private /tmp needs them too) and cannot be made, New
		// fails: nothing is served without them.
		if err := r.pool.wait(); err != nil {
			return nil, err
		}
	}
	r.self = instance.Record{
		Name: r.name, Pid: r.pid, Start: st.Start, Slice: r.info.Slice,
		Containment: r.info.Mode.String(), PIDNamespace: r.info.PIDNamespace.On, Started: time.Now(),
	}
	if r.root != nil {
		r.self.RootMade = r.root.Made()
	}
	if r.state, err = instance.OpenStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	if r.lim.TotalOutputBudget = opts.TotalOutputBudget; r.lim.TotalOutputBudget == 0 {
		// A quarter of the state directory's file system (usually a tmpfs: memory).
		size, err := r.state.Size()
		if err != nil {
			size = 4 * DefaultTotalOutputBudget
		}
		r.lim.TotalOutputBudget = max(size/4, r.lim.OutputBudget)
	}
	r.outputs = taskout.NewPool(r.lim.TotalOutputBudget)
	if r.dir, err = instance.Create(r.state, &r.self); err != nil {
		return nil, err
	}
	if r.devnull, err = os.Open(os.DevNull); err != nil {
		return nil, err
	}
	if opts.Announce != nil {
		b, _ := json.Marshal(r.self)
		if _, err := opts.Announce.Write(append(b, '\n')); err != nil {
			r.log.Warn("announcing the instance to the guard failed", "error", err)
		}
	}
	if opts.User != nil {
		if err := r.checkUser(); err != nil {
			return nil, err
		}
	}
	if !opts.NoSweep {
		r.wg.Add(1)
		go r.sweep()
	}
	if r.root != nil {
		r.wg.Add(1)
		go r.watchAdopted(r.stopWatch)
	}
	ok = true
	return r, nil
}

// undoNew releases what a failed New had made; nothing was started that uses it.
func (r *Reaper) undoNew() {
	if r.forker != nil {
		r.forker.Stop()
	}
	if r.pool != nil {
		r.pool.close() // the probe and its init end before the slice they are in is dropped
	}
	r.wg.Wait() // the record's rewrite with the probe's answer, before the state goes
	if r.kids != nil {
		r.kids.Close(nil)
	}
	if r.devnull != nil {
		r.devnull.Close()
	}
	if r.instance != nil {
		r.policy.Slice(context.Background(), r.instance, time.Now().Add(r.lim.CloseTimeout))
	}
	r.drop()
	r.spare.Release()
}

// drop removes this Reaper's slice (dropInstance) and state directory, and closes what it holds open
// of the state.
func (r *Reaper) drop() error {
	r.dropMu.Lock()
	defer r.dropMu.Unlock()
	err := r.dropInstance()
	if r.state == nil || r.stateClosed {
		return err
	}
	r.stateClosed = true
	if r.dir != nil {
		r.dir.Close()
		err = errors.Join(err, r.state.RemoveAll(instance.DirName(r.name)))
	}
	r.state.Close()
	return err
}

// sweep cleans up after instances that died without doing it themselves, and logs what it found.
func (r *Reaper) sweep() {
	defer r.wg.Done()
	opts := sweep.Options{Where: instance.Where{Cgroup: r.opts.Cgroup, StateDir: r.state.Path(), NoCgroup: r.root == nil},
		Skip: r.name, CloseTimeout: r.lim.CloseTimeout, Logger: r.log}
	if r.root != nil {
		opts.Cgroup.Root = r.root.Path()
	}
	rep, err := sweep.Run(opts)
	r.obs.Swept(sweepReport(rep))
	for _, d := range rep.Dead {
		attrs := []any{"instance", d.Name, "killed", len(d.Processes), "processes", d.Processes, "removed", d.Removed}
		if d.Slice != "" {
			attrs = append(attrs, "slice", d.Slice)
		}
		if d.Error != "" {
			attrs = append(attrs, "error", d.Error)
		}
		r.log.Warn("swept up after a dead instance", attrs...)
	}
	if err != nil {
		r.log.Warn("sweeping after dead instances", "error", err)
	}
}

// contain decides the containment mode and, for cgroups, creates this Reaper's slice. A cgroup root
// or mountpoint that was asked for explicitly must work in every mode: no silent fallback.
func (r *Reaper) contain() error {
	asked := r.opts.Cgroup.Root
	if asked == "" {
		asked = r.opts.Cgroup.Mountpoint
	}
	if r.opts.Containment == ContainProcess {
		if asked != "" {
			return fmt.Errorf("cgroup root %s was asked for with process containment, which uses no cgroups", asked)
		}
		if r.opts.SessionLimits != (cgroup.Limits{}) {
			return errors.New("per-session limits were asked for with process containment: they need cgroup containment")
		}
		r.info.Mode = ContainProcess
		r.info.Cgroup = cgroup.Detect(r.opts.Cgroup)
		r.info.Cgroup.Reason = "process containment was requested"
		return nil
	}
	root, err := r.openRoot()
	if err == nil {
		// One slice per Reaper, named by pid and start time: Reapers sharing a root never touch
		// each other's sessions, and a successor can tell a dead owner's slices.
		if r.instance, err = root.Create(r.name); err != nil {
			root.Release()
		}
	}
	var limitsErr *limitsError
	switch {
	case errors.As(err, &limitsErr):
		return err
	case err != nil && asked != "":
		return fmt.Errorf("cgroup root %s was asked for but cannot be used: %w", asked, err)
	case err != nil && r.opts.Containment == ContainCgroup:
		return fmt.Errorf("cgroup containment required but unavailable: %w%s", err, r.noScopeText())
	case err != nil:
		r.info.Mode = ContainProcess
		r.info.Cgroup = cgroup.Detect(r.opts.Cgroup) // what there is, for the log
		r.info.Cgroup.Reason = err.Error() + r.noScopeText()
		if r.opts.SessionLimits != (cgroup.Limits{}) {
			r.dropLimits(r.opts.SessionLimits, "process containment: "+err.Error())
		}
		return nil
	}
	if r.info.Scope != "" {
		r.log.Info("cgroup containment in the delegated scope "+r.info.Scope+", asked of "+r.info.ScopeManager, "scope", r.info.Scope, "cgroup", root.Info().Root)
	}
	r.root = root
	r.policy.Method = root.Info().Kill
	r.info.Mode = ContainCgroup
	r.info.Cgroup = root.Info()
	r.info.Slice = r.instance.Path()
	r.info.Limits = r.limits
	return nil
}

// Containment says how processes are contained. It waits for the start-up probe of PID namespaces,
// which New does not wait for (see newInitPool).
func (r *Reaper) Containment() ContainmentInfo {
	r.pool.wait()
	return r.info
}

// Limits reports the bounds and periods in effect.
func (r *Reaper) Limits() Limits { return r.lim }

// Instance describes this Reaper as it recorded itself in its state directory.
// Like Containment, it waits for the start-up probe of PID namespaces.
func (r *Reaper) Instance() Instance {
	r.pool.wait()
	return instanceOf(r.self)
}

// NewSession creates a session. Its slice is created on its first command, so sessions that never
// run anything cost nothing but a temporary directory. id must be 1 to 128 printable ASCII
// characters without spaces; it names the session in logs and errors.
func (r *Reaper) NewSession(id string, opts SessionOptions) (*Session, error) {
	if err := instance.CheckSessionID(id); err != nil {
		return nil, err
	}
	dir := opts.WorkDir
	if dir == "" {
		dir = r.workDir
	} else if abs, err := filepath.Abs(dir); err == nil { // absolute, as the Reaper's (see New)
		dir = abs
	}
	if err := r.checkTmpDir(dir); err != nil {
		return nil, fmt.Errorf("new session %s: %w", id, err)
	}
	r.mu.Lock()
	closing := r.closing
	r.seq++
	name := instance.SessionName(r.seq)
	r.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("new session %s: %w", id, ErrReaperClosed)
	}
	// The session's directory is root's (the Reaper's user's) alone, whoever its tasks run as: no
	// task writes there, so nothing a task can do steers what the Reaper reads or writes in it.
	if err := r.dir.Mkdir(name); err != nil {
		return nil, fmt.Errorf("new session %s: %w", id, err)
	}
	sdir, err := r.dir.OpenDir(name)
	if err != nil {
		r.dir.RemoveAll(name)
		return nil, fmt.Errorf("new session %s: %w", id, err)
	}
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		sdir.Close()
		r.dir.RemoveAll(name)
		return nil, fmt.Errorf("new session %s: %w", id, ErrReaperClosed)
	}
	s := &Session{
		r: r, id: id, name: name, dir: sdir, outputs: taskout.NewStore(taskout.Options{Dir: sdir, Budget: r.lim.OutputBudget, Tail: int(r.lim.OutputTail), Log: r.log, Pool: r.outputs}), created: time.Now(),
		onTaskEnd: opts.OnTaskEnd, workDir: dir, cwd: dir, tasks: make(map[string]*task), ns: &sessionNS{pool: r.pool, session: id},
		abandon: make(chan struct{}), killed: make(chan struct{}), done: make(chan struct{}),
	}
	s.marker = instance.SessionMarker(r.name, s.name)
	s.ready.s = s
	r.sessions[s] = true
	r.mu.Unlock()
	s.record()
	return s, nil
}

// forget drops a closed session, and adds what it used (its slice's last reading) to the ended
// sessions' totals in the same step (see Usage).
func (r *Reaper) forget(s *Session, used cgroup.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, s)
	r.ended.cpu += used.CPU
	r.ended.hits = r.ended.hits.Add(used.Hits)
}

// Close closes every session (in parallel, at most 8 at a time), then kills whatever this process
// still has below it, removes its slice and stops the child reaper. Cancelling ctx cuts grace
// periods short: a second shutdown signal should cancel it. It is idempotent and returns only when
// the work is done.
func (r *Reaper) Close(ctx context.Context) error {
	r.mu.Lock()
	first := !r.closing
	r.closing = true
	sessions := slices.Collect(maps.Keys(r.sessions))
	r.mu.Unlock()
	if !first {
		<-r.done
		return r.closeErr
	}
	defer close(r.done)
	r.pool.wait() // the probe ends before anything it could touch (the inits' thread, the record) is let go
	close(r.stopWatch)
	errs := []error{closeSessions(ctx, sessions)}
	// Then whatever is still below this process and in its slice: nothing may outlive the Reaper.
	errs = append(errs, r.killEverything(ctx, time.Now().Add(r.lim.CloseTimeout)))
	r.wg.Wait()
	r.pool.close() // the thread inits are forked from; every init is dead
	errs = append(errs, r.drop())
	if r.forker != nil {
		r.forker.Stop()
	}
	r.kids.Close([]string{r.shell, "-c", ":"})
	r.devnull.Close()
	r.spare.Release()
	reap.Release()
	r.closeErr = errors.Join(errs...)
	return r.closeErr
}

// Abandon is the last resort of a program that must exit now, its guard dead and its shutdown stuck:
// it SIGKILLs every process below this one and everything in this Reaper's slice, waits for them as a
// hurried teardown does (kill.HurryWait at most), and removes the slice and the state directory; what
// it cannot remove waits for the next instance's sweep. It may run while Close does, or after it: it
// closes no descriptor that Close or a session may be using. The program is to exit after it.
func (r *Reaper) Abandon() error {
	hurried, hurry := context.WithCancel(context.Background())
	hurry() // a last resort: no wait past kill.HurryWait
	err := r.killEverything(hurried, time.Now().Add(r.lim.CloseTimeout))
	r.dropMu.Lock()
	defer r.dropMu.Unlock()
	err = errors.Join(err, r.dropInstance())
	if r.state != nil && r.dir != nil && !r.stateClosed {
		err = errors.Join(err, r.state.RemoveAll(instance.DirName(r.name)))
	}
	return err
}

// killEverything kills whatever is below this process and in its slice (see kill.Everything), waiting
// until end or kill.HurryWait after ctx is done, and logs the descendants no session claimed.
func (r *Reaper) killEverything(ctx context.Context, end time.Time) error {
	killed, left, err := r.policy.Everything(ctx, kill.Everything{Self: r.pid, Slice: r.instance, End: end})
	if len(killed) > 0 {
		r.log.Info("killed processes no session claimed", "count", len(killed), "processes", killed)
	}
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("%s: %d processes remain after SIGKILL and the wait for them: %v", r.instance.Path(), len(left), left)
	}
	return err
}

// dropInstance removes this Reaper's slice, once killEverything has emptied it, and the root with it
// when no other instance uses it (cgroup.Root.Release).
func (r *Reaper) dropInstance() error {
	if r.instance == nil {
		return nil
	}
	if err := r.instance.Remove(); err != nil {
		return err
	}
	return r.root.Release()
}

// closeSessions closes sessions in parallel, at most 8 at a time (each walks /proc), and joins their
// errors. Once ctx is done (a second signal) the rest start at once: reaper must be gone soon.
func closeSessions(ctx context.Context, sessions []*Session) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make([]error, len(sessions))
	for i, s := range sessions {
		held := false
		select {
		case sem <- struct{}{}:
			held = true
		case <-ctx.Done():
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if held {
				defer func() { <-sem }()
			}
			_, errs[i] = s.CloseFor(ctx, "shutdown")
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
