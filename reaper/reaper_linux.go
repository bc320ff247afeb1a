package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// active guards the one process-wide resource a Reaper takes: the child table. A process can have
// only one wait4(-1) loop, so only one Reaper may exist at a time. This is the package's only global
// state, and it mirrors the kernel's.
var active atomic.Bool

// Reaper owns every process the program starts. Create one with New, and Close it before exit.
//
// Lock order: Reaper.mu is a leaf; nothing else is locked while it is held, and no file-system or
// process work is done under it.
type Reaper struct {
	// The fields up to mu are fixed at creation.
	opts       Options
	lim        Limits
	log        *slog.Logger
	self       int
	kids       *children
	devnull    *os.File
	shell      string
	env        []string
	workDir    string
	stateDir   string // where sessions keep their small files; tmpfs where there is one
	info       ContainmentInfo
	root       *cgroup.Root      // nil in process containment
	name       string            // r<pid>-<start time>: this Reaper among others, past and present
	instance   *cgroup.Slice     // this Reaper's slice below root (named name), holding the sessions' slices
	killMethod cgroup.KillMethod // the strongest kill the kernel offers for slices
	noClone3   atomic.Bool       // the host refused clone3 into a cgroup once: join before exec instead

	// mu guards the fields that follow.
	mu       sync.Mutex
	sessions map[*Session]bool
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
}

func (c ContainmentInfo) String() string {
	if c.Mode == ContainCgroup {
		return fmt.Sprintf("cgroup (%s; sessions under %s)", c.Cgroup, c.Slice)
	}
	why := c.Cgroup.Reason
	if why == "" {
		why = "requested"
	}
	return "process (process groups, environment marker, subreaper and /proc walk; cgroups not used: " + why + ")"
}

// New makes this process a child subreaper, starts the child reaper and decides the containment
// mode. Only one Reaper may exist in a process at a time.
func New(opts Options) (*Reaper, error) {
	if !active.CompareAndSwap(false, true) {
		return nil, errors.New("another Reaper is active in this process (there is one child table)")
	}
	r, err := newReaper(opts)
	if err != nil {
		active.Store(false)
		return nil, err
	}
	return r, nil
}

func newReaper(opts Options) (*Reaper, error) {
	r := &Reaper{
		opts: opts, lim: opts.limits(), log: opts.Logger, self: os.Getpid(), env: baseEnv(opts.Env),
		sessions: make(map[*Session]bool), done: make(chan struct{}),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if r.shell, err = findShell(opts.Shell); err != nil {
		return nil, err
	}
	if r.workDir = opts.WorkDir; r.workDir == "" {
		if r.workDir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
	}
	r.stateDir = stateDir()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become child subreaper: %w", err)
	}
	st, _ := proc.NewWalker().Stat(r.self)
	r.name = "r" + strconv.Itoa(r.self) + "-" + strconv.FormatUint(st.Start, 10)
	if err := r.contain(); err != nil {
		return nil, err
	}
	if r.devnull, err = os.Open(os.DevNull); err != nil {
		r.dropInstance()
		return nil, err
	}
	r.kids = newChildren()
	return r, nil
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
		r.info.Mode = ContainProcess
		r.info.Cgroup = cgroup.Detect(r.opts.Cgroup)
		r.info.Cgroup.Reason = "process containment was requested"
		return nil
	}
	root, err := cgroup.OpenRoot(r.opts.Cgroup)
	if err == nil {
		// One slice per Reaper instance, named by pid and start time, so that Reapers sharing a
		// root never touch each other's sessions, and a successor can tell a dead owner's slices.
		if r.instance, err = root.Create(r.name); err != nil {
			root.Release()
		}
	}
	switch {
	case err != nil && asked != "":
		return fmt.Errorf("cgroup root %s was asked for but cannot be used: %w", asked, err)
	case err != nil && r.opts.Containment == ContainCgroup:
		return fmt.Errorf("cgroup containment required but unavailable: %w", err)
	case err != nil:
		r.info.Mode = ContainProcess
		r.info.Cgroup = cgroup.Detect(r.opts.Cgroup) // what there is, for the log
		r.info.Cgroup.Reason = err.Error()
		return nil
	}
	r.root = root
	r.killMethod = root.Info().Kill
	r.info.Mode = ContainCgroup
	r.info.Cgroup = root.Info()
	r.info.Slice = r.instance.Path()
	return nil
}

// stateDir picks the directory for the shells' working-directory files: each command's shell writes
// one as it exits, so a memory filesystem (/dev/shm, $XDG_RUNTIME_DIR) saves a disk journal's
// latency on every command; elsewhere the temporary directory.
func stateDir() string {
	for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		var st unix.Statfs_t
		if d != "" && unix.Statfs(d, &st) == nil && st.Type == unix.TMPFS_MAGIC && unix.Access(d, unix.W_OK) == nil {
			return d
		}
	}
	return os.TempDir()
}

// Containment says how processes are contained.
func (r *Reaper) Containment() ContainmentInfo { return r.info }

// Limits reports the bounds and periods in effect.
func (r *Reaper) Limits() Limits { return r.lim }

// NewSession creates a session. Its slice is created on its first command, so sessions that never
// run anything cost nothing but a temporary directory. id must be 1 to 128 printable ASCII
// characters without spaces; it names the session in logs and errors.
func (r *Reaper) NewSession(id string, opts SessionOptions) (*Session, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	dir := opts.WorkDir
	if dir == "" {
		dir = r.workDir
	}
	tmp, err := os.MkdirTemp(r.stateDir, "reaper-session-")
	if err != nil {
		return nil, fmt.Errorf("new session %s: %w", id, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		os.Remove(tmp)
		return nil, fmt.Errorf("new session %s: %w", id, ErrReaperClosed)
	}
	r.seq++
	s := &Session{
		r: r, id: id, name: "s-" + strconv.Itoa(r.seq), tmp: tmp,
		onTaskEnd: opts.OnTaskEnd, workDir: dir, cwd: dir, tasks: make(map[string]*task),
		abandon: make(chan struct{}), done: make(chan struct{}),
	}
	// The marker names the session by the Reaper and the slice, not by id: an MCP session id may
	// be a credential, and the environment of a process is readable by more than its owner's client.
	s.marker = EnvSession + "=" + r.name + "/" + s.name
	r.sessions[s] = true
	return s, nil
}

func checkID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("session id must be 1 to 128 characters, got %d", len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("session id %q: byte %q not allowed (printable ASCII without spaces)", id, id[i])
		}
	}
	return nil
}

// forget drops a closed session.
func (r *Reaper) forget(s *Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, s)
}

// Close closes every session (in parallel, at most 8 at a time), then kills whatever this process
// still has below it, removes its slice and stops the child reaper. Cancelling ctx cuts grace
// periods short: a second shutdown signal should cancel it. It is idempotent and returns only when
// the work is done.
func (r *Reaper) Close(ctx context.Context) error {
	r.mu.Lock()
	first := !r.closing
	r.closing = true
	sessions := make([]*Session, 0, len(r.sessions))
	for s := range r.sessions {
		sessions = append(sessions, s)
	}
	r.mu.Unlock()
	if !first {
		<-r.done
		return r.closeErr
	}
	defer close(r.done)
	errs := []error{closeSessions(ctx, sessions)}
	r.killDescendants()
	errs = append(errs, r.dropInstance())
	r.kids.close([]string{r.shell, "-c", ":"})
	r.devnull.Close()
	active.Store(false)
	r.closeErr = errors.Join(errs...)
	return r.closeErr
}

// killDescendants kills whatever is still below this process once every session is closed (an
// escapee whose marker was scrubbed, in process containment): nothing may outlive us. It repeats until
// a pass finds nothing, for what forks while a pass runs.
func (r *Reaper) killDescendants() {
	w := proc.NewWalker()
	killed := 0
	for pass := 0; pass < maxWalkPasses; pass++ {
		left, err := w.Descendants(r.self)
		if err != nil || len(left) == 0 {
			break
		}
		hs := w.Verify(left)
		if err := proc.SignalAll(hs, unix.SIGKILL); err != nil {
			r.log.Warn("signal failed", "scope", "reaper", "error", err)
		}
		w.WaitGone(context.Background(), hs, time.Now().Add(r.lim.CloseTimeout))
		proc.CloseAll(hs)
		killed += len(hs)
	}
	if killed > 0 {
		r.log.Info("killed processes no session claimed", "count", killed)
	}
}

// dropInstance kills and removes this Reaper's slice, and the root with it when no other instance
// uses it (cgroup.Root.Release).
func (r *Reaper) dropInstance() error {
	if r.instance == nil {
		return nil
	}
	left, err := r.killSlice(r.instance, time.Now().Add(r.lim.CloseTimeout))
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%s: %d processes remain after %v: %v", r.instance.Path(), len(left), r.lim.CloseTimeout, left)
	}
	if err := r.instance.Remove(); err != nil {
		return err
	}
	return r.root.Release()
}

// closeSessions closes sessions in parallel, at most 8 at a time, and joins their errors.
func closeSessions(ctx context.Context, sessions []*Session) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make([]error, len(sessions))
	for i, s := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[i] = s.Close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
