package reaper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/safefs"
	"github.com/cgreaper/reaper/internal/shell"
	"github.com/cgreaper/reaper/internal/taskout"
	"github.com/cgreaper/reaper/internal/tty"
)

// SessionOptions configures one session. The zero value is ready to use.
type SessionOptions struct {
	// WorkDir is the session's first working directory; empty means Options.WorkDir.
	WorkDir string
	// OnTaskEnd, if set, is called once for each background task when it becomes terminal, on a
	// goroutine that Close waits for: it must return promptly (hand slow work to a goroutine of its
	// own).
	OnTaskEnd func(TaskInfo)
}

// Session runs the commands of one client and owns everything they start. Its methods are safe for
// concurrent use.
//
// The lock order is in the package documentation.
type Session struct {
	// The fields up to mu are fixed at creation.
	r         *Reaper
	id        string
	name      string         // the slice's name, unique within the Reaper
	marker    string         // EnvSession=<reaper name>/<session name>, inherited by every task
	dir       *safefs.Dir    // the session's directory in the Reaper's: its record; closed by the teardown
	outputs   *taskout.Store // its tasks' output files, in dir
	onTaskEnd func(TaskInfo)
	workDir   string // the first working directory, where a vanished one is reset to
	created   time.Time
	abandon   chan struct{} // closed when Close stops waiting for processes that will not exit
	killed    chan struct{} // closed when the teardown's kills are done (see Killed)
	done      chan struct{} // closed when Close has finished; rep and err are set before
	ns        *sessionNS    // the PID namespaces its tasks run in
	ready     readyShell    // the shell started ahead for its next foreground command (see ready_linux.go)
	wg        sync.WaitGroup
	recordMu  sync.Mutex // serializes writes of the session's record (see record)
	// spawnMu is held while a task is started (its leaf, its files, its init, its process), from the
	// check that the session takes tasks to the task's place in tasks: starts take turns, and the
	// teardown, once it has said the session is closing, takes it to wait for the start under way.
	spawnMu sync.Mutex

	// mu guards the fields that follow; what it is never held across is in the package's lock order.
	mu      sync.Mutex
	cwd     string
	slice   *cgroup.Slice   // created on the first command (under spawnMu too); nil in process containment
	idle    []*cgroup.Slice // empty leaves kept for reuse: a fresh cgroup costs more than the fork
	leaves  int             // leaves created so far, for their names
	tasks   map[string]*task
	recent  map[string]string      // foreground commands by task id, to name their leftovers in List
	kept    []*task                // tasks cleared from tasks whose output file task_output still reads, oldest first
	pumps   map[*taskout.Pump]bool // every task's output pump still running, pruned tasks' too: Close stops them all
	ran     bool                   // a task was started; in process containment Close walks /proc even when none is kept
	known   map[int]uint64         // process containment: processes seen in the session (pid -> start time), which seed Close's walk
	closing bool
	reason  string // why the session ends, from the first CloseFor
	// seen is what the session's slice counted, each counter the most read so far; usageFinal says
	// the teardown has read it for the last time (see usage).
	seen       cgroup.Stats
	usageFinal bool
	// starting is the id of the task being started (under spawnMu), from before its process is
	// born until it is in tasks (or the ready shell): a listing takes its processes for no leftover.
	starting string

	// Set by the teardown before done is closed; read only after.
	rep KillReport
	err error
}

// ID returns the id the session was created with.
func (s *Session) ID() string { return s.id }

// Marker returns the REAPER_SESSION=... entry every process of the session inherits.
func (s *Session) Marker() string { return s.marker }

// Cwd returns the working directory the next command starts in.
func (s *Session) Cwd() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd
}

// StartOptions configures a background task. The zero value starts it with /dev/null as its input.
type StartOptions struct {
	// Description is kept with the task and shown in listings.
	Description string
	// Stdin keeps the task's standard input open, a pipe, for WriteInput.
	Stdin bool
	// TTY, if set, runs the task on a pseudo-terminal of this size (see input_linux.go): its standard
	// input, output and error, and its controlling terminal; WriteInput types into it.
	TTY *TermSize
}

// launch is what start needs to know of a task beyond its command.
type launch struct {
	description string
	background  bool
	stdin       bool
	tty         *TermSize
	// command and gate, if set, start the task as a ready shell (see ready_linux.go): its shell runs
	// shell.Loader, with its command file and the read end of its gate, instead of a command.
	command, gate *os.File
}

// start spawns command as a new task. The caller holds no lock.
func (s *Session) start(command string, l launch) (*task, string, error) {
	if err := cmp.Or(checkCommand(command), checkDescription(l.description)); err != nil {
		return nil, "", fmt.Errorf("session %s: %w", s.id, err)
	}
	listed := command
	if !l.background {
		listed = shorten(command, maxListedCommand)
	}
	s.prune()
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	if err := s.admit(l.background); err != nil {
		return nil, "", err
	}
	var notice string
	base := s.sliceHits()
	t, sp, ready := s.ready.take(command, listed, s.Cwd(), l, base)
	if !ready {
		id := newID("t-")
		t = &task{
			id: id, command: listed, description: l.description, started: time.Now(),
			background: l.background, status: Running, done: make(chan struct{}),
			out: s.outputs.New(id + ".out"), base: hitsBase{slice: base},
		}
		var err error
		if sp, notice, err = s.launch(t, func(in *pidns.Init) (spawned, string, error) { return s.launchIn(in, t, command, l) }); err != nil {
			return nil, "", fmt.Errorf("session %s: %w", s.id, err)
		}
	}
	if !l.background {
		s.ready.ranForeground()
	}
	s.adopt(t, sp, !ready) // a ready shell's watcher is its life (readyShell.life)
	return t, notice, nil
}

// adopt makes t, whose process sp was just started, one of the session's tasks: its output's pump
// runs from now on, if it has one, and its watcher if watch is set. spawnMu is held.
func (s *Session) adopt(t *task, sp spawned, watch bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[t.id], s.starting = t, ""
	s.ran = true
	if t.pump != nil {
		if s.pumps == nil {
			s.pumps = make(map[*taskout.Pump]bool)
		}
		s.pumps[t.pump] = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t.pump.Run()
			t.out.End() // every writer is gone: the file is complete
			if t.in != nil {
				t.in.Close() // and no process reads the input
			}
			s.mu.Lock()
			delete(s.pumps, t.pump)
			s.mu.Unlock()
		}()
	}
	if watch {
		s.wg.Add(1)
		go s.watch(t, sp)
	}
}

// isClosing reports whether the session's end has begun.
func (s *Session) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// admit refuses a task in a closing session, or a background task over the limit. spawnMu is held:
// once it has admitted a task, the teardown waits for its start.
func (s *Session) admit(background bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return fmt.Errorf("session %s: %w", s.id, ErrSessionClosed)
	}
	if background && s.runningBackgroundLocked() >= s.r.lim.MaxTasks {
		return fmt.Errorf("session %s: %w (the limit is %d; stop one or wait for one to end)",
			s.id, ErrTooManyTasks, s.r.lim.MaxTasks)
	}
	return nil
}

// launch starts t's process by start, which gets the session's init (see sessionNS.use) and undoes
// what it did when it fails; meanwhile t is the task being started. spawnMu is held.
func (s *Session) launch(t *task, start func(in *pidns.Init) (spawned, string, error)) (sp spawned, notice string, err error) {
	s.setStarting(t.id)
	err = s.ns.use(func(in *pidns.Init) error {
		sp, notice, err = start(in)
		return err
	})
	if err != nil {
		s.setStarting("")
		return sp, "", err
	}
	t.pid, t.start = sp.pid, sp.start
	t.main = proc.NewHandle(proc.Stat{Pid: sp.pid, Start: sp.start}, sp.pidfd)
	return sp, notice, nil
}

// setStarting records the id of the task being started, or that none is (see Session.starting).
func (s *Session) setStarting(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = id
}

// launchIn gives t its leaf, its output pipe or terminal, its input and its process, started by in,
// the session's init (nil without namespaces), and undoes that on failure. The notice, if any, says
// that the session's working directory could not be entered (see enterableDir).
func (s *Session) launchIn(in *pidns.Init, t *task, command string, l launch) (spawned, string, error) {
	if s.r.root != nil {
		if err := s.place(t); err != nil {
			return spawned{}, "", err
		}
	}
	io, err := s.r.taskFiles(t, l, in)
	if err != nil {
		s.unplace(t)
		return spawned{}, "", err
	}
	defer io.closeChild()
	var cwdW *os.File
	if !t.background {
		if t.cwd, cwdW, err = s.r.cwdPipe(); err != nil {
			io.closeOurs()
			s.unplace(t)
			return spawned{}, "", fmt.Errorf("working-directory pipe: %w", err)
		}
		defer cwdW.Close()
	}
	env := append(s.r.env[:len(s.r.env):len(s.r.env)], s.marker, EnvTask+"="+t.id)
	spec := spawnSpec{
		env:    env,
		dir:    s.Cwd(),
		init:   in,
		stdin:  io.stdin,
		stdout: io.stdout,
		cwd:    cwdW,
		leaf:   t.leaf,
		tty:    l.tty != nil,
	}
	if l.command != nil {
		spec.argv = []string{s.r.shell, "-c", shell.Loader}
		spec.command, spec.gate = l.command, l.gate
	} else {
		spec.argv = []string{s.r.shell, "-c", shell.Script(command, cwdW != nil, s.r.dupCwd, s.r.bash)}
	}
	sp, err := s.r.spawn(spec)
	var notice string
	if err != nil && l.command == nil && spec.dir != s.workDir && !enterableDir(err) {
		// The directory is the tasks' to enter, with their credentials: reaper never looks at it
		// itself, not even with stat (which would tell a task, as root, what exists where it cannot
		// look). Where they cannot, the session goes back to where it started and says so.
		notice = fmt.Sprintf("the working directory %s cannot be entered (%v); the session is back in %s, where it started", spec.dir, errnoOf(err), s.workDir)
		s.mu.Lock()
		s.cwd = s.workDir
		s.mu.Unlock()
		spec.dir = s.workDir
		sp, err = s.r.spawn(spec)
	}
	if err != nil {
		io.closeOurs()
		t.closeCwd()
		s.unplace(t)
		return spawned{}, "", err
	}
	return sp, notice, nil
}

// enterableDir reports whether a failed spawn's error is not that of a failed chdir (the directory is
// gone, or the tasks' user may not enter it).
func enterableDir(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOENT, syscall.EACCES, syscall.ENOTDIR, syscall.ELOOP, syscall.ENAMETOOLONG} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// errnoOf is the system's words for the errno err wraps, or err's own.
func errnoOf(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// taskIO are a task's standard files: the child's ends, and reaper's, which t keeps (pump, input).
type taskIO struct {
	stdin, stdout *os.File // the child's; stdin nil: /dev/null
	t             *task
}

// taskFiles makes t's output pipe, or its terminal (in the devpts instance of in, the session's
// init, where it has one: see input_linux.go), and its input pipe if it has one, and t's pump.
func (r *Reaper) taskFiles(t *task, l launch, in *pidns.Init) (taskIO, error) {
	io := taskIO{t: t}
	var ours *os.File
	var err error
	switch {
	case l.tty != nil:
		var id proc.Input
		if ours, io.stdout, id, err = r.openTerminal(*l.tty, in); err != nil {
			return io, err
		}
		io.stdin = io.stdout
		t.in = tty.NewTerminal(ours, id)
	default:
		if ours, io.stdout, err = os.Pipe(); err != nil {
			return io, fmt.Errorf("output pipe: %w", err)
		}
		if l.stdin {
			var w *os.File
			var id proc.Input
			if io.stdin, w, id, err = tty.Pipe(); err != nil {
				ours.Close()
				io.stdout.Close()
				return io, err
			}
			t.in = tty.NewPipe(w, id)
		}
	}
	if t.pump, err = taskout.NewPump(ours, t.out); err != nil {
		ours.Close()
		io.closeChild()
		io.closeOurs()
		return io, fmt.Errorf("output pipe: %w", err)
	}
	return io, nil
}

// closeChild closes the child's ends, which this process no longer needs once the child has them.
func (io taskIO) closeChild() {
	if io.stdin != nil && io.stdin != io.stdout {
		io.stdin.Close()
	}
	if io.stdout != nil {
		io.stdout.Close()
	}
}

// closeOurs closes this process's ends, when the task could not be started.
func (io taskIO) closeOurs() {
	if io.t.pump != nil {
		io.t.pump.Close()
	}
	if io.t.in != nil {
		io.t.in.Close() // a pipe's write end (a terminal's master is the pump's)
	}
}

// place gives t a leaf of the session's slice, creating the slice on the session's first command.
// spawnMu is held; mu is not held while a cgroup is made.
func (s *Session) place(t *task) error {
	s.mu.Lock()
	slice := s.slice
	var leaf *cgroup.Slice
	if n := len(s.idle); n > 0 {
		leaf, s.idle = s.idle[n-1], s.idle[:n-1]
	}
	s.mu.Unlock()
	if slice == nil {
		var err error
		if slice, err = s.r.createSlice(s.name); err != nil {
			return err
		}
		s.mu.Lock()
		s.slice = slice
		s.mu.Unlock()
	}
	if leaf == nil {
		s.mu.Lock()
		s.leaves++
		name := "l-" + strconv.Itoa(s.leaves)
		s.mu.Unlock()
		var err error
		if leaf, err = slice.Create(name); err != nil {
			return err
		}
	} else if s.r.watchHits {
		t.base.leaf, _ = leaf.Hits() // a reused leaf counts its earlier tasks' too
	}
	t.leaf = leaf
	return nil
}

// maxIdleLeaves bounds the leaves a session keeps for reuse.
const maxIdleLeaves = 4

// unplace gives t's leaf back to the session (releaseLeaf), where its start failed.
func (s *Session) unplace(t *task) {
	s.releaseLeaf(t.leaf)
	t.leaf = nil
}

// releaseLeaf keeps an empty leaf for reuse, or removes it; a leaf that still holds processes stays
// where it is (the session's Close removes it). mu is not held while the leaf is read or removed.
func (s *Session) releaseLeaf(leaf *cgroup.Slice) {
	if leaf == nil || !emptyLeaf(leaf) {
		return
	}
	s.mu.Lock()
	kept := s.keepLeafLocked(leaf)
	s.mu.Unlock()
	if !kept {
		s.removeLeaves([]*cgroup.Slice{leaf})
	}
}

// emptyLeaf reports whether leaf holds no process; a leaf that cannot be read counts as holding some.
func emptyLeaf(leaf *cgroup.Slice) bool {
	populated, err := leaf.Populated()
	return err == nil && !populated
}

// keepLeafLocked keeps an empty leaf for reuse and reports true, where the session keeps fewer than
// maxIdleLeaves and is not closing; the caller removes it otherwise (removeLeaves), once mu is let go.
func (s *Session) keepLeafLocked(leaf *cgroup.Slice) bool {
	if len(s.idle) < maxIdleLeaves && !s.closing {
		s.idle = append(s.idle, leaf)
		return true
	}
	return false
}

// removeLeaves removes empty leaves the session keeps no more. mu is not held: a removal retries a
// busy cgroup for up to about two seconds (cgroup.Slice.Remove).
func (s *Session) removeLeaves(leaves []*cgroup.Slice) {
	for _, leaf := range leaves {
		if err := leaf.Remove(); err != nil {
			// Close removes the whole slice and reports what it cannot.
			s.r.log.Warn("removing an idle leaf failed", "session", s.id, "error", err)
		}
	}
}

func (s *Session) runningBackgroundLocked() int {
	n := 0
	for _, t := range s.tasks {
		t.mu.Lock()
		if t.background && t.status == Running {
			n++
		}
		t.mu.Unlock()
	}
	return n
}

// watch waits for the task's main process to exit, enforces the background safety net, records the
// end and, for background tasks, reports it.
func (s *Session) watch(t *task, sp spawned) {
	defer s.wg.Done()
	var timeout <-chan time.Time
	if d := s.r.lim.BackgroundTimeout; d > 0 && t.isBackground() {
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	code := -1
	select {
	case st := <-sp.exited:
		code = st.Code()
	case <-timeout:
		if t.stopping(TimedOut) {
			s.killTask(context.Background(), t)
		}
		select {
		case st := <-sp.exited:
			code = st.Code()
		case <-s.abandon:
		}
	case <-s.abandon:
	}
	t.exited()
	if t.pump != nil {
		if t.in != nil && t.in.TTY() {
			// A terminal hands what was written to it on to its master side asynchronously (a
			// kernel worker): wait, briefly, for the output's end, when nothing else holds it.
			t.pump.WaitEnd(ttyEnd)
		}
		// Everything the main process wrote is in the pipe now; take it before declaring the end.
		t.pump.Drain()
	}
	// The shell's EXIT trap wrote its directory before it exited; a process it left may still hold
	// the pipe, so it is read without waiting, and closed.
	if t.cwd != nil && !t.isBackground() {
		if dir, ok := shell.ReadCwd(t.cwd); ok {
			s.mu.Lock()
			s.cwd = dir // if the command removed it, the next command says so (see launch)
			s.mu.Unlock()
		}
	}
	t.closeCwd()
	var hits cgroup.Hits
	if s.r.watchHits && t.leaf != nil {
		hits = s.taskHits(t)
	}
	t.finish(code, hits)
	info := t.info(0)
	s.r.obs.TaskEnded(TaskEnd{
		Status: info.Status, ExitCode: info.ExitCode, Background: info.Background, OOMKilled: info.OOMKilled,
		Duration: info.Ended.Sub(info.Started),
	})
	if info.Background && s.onTaskEnd != nil {
		s.onTaskEnd(s.info(t))
	}
}

// killTask ends the task's whole tree: its leaf, and processes outside it that carry its marker or
// descend from it.
func (s *Session) killTask(ctx context.Context, t *task) (KillReport, error) {
	self, skip, _ := s.walkRoot()
	rep, err := s.r.terminate(ctx, kill.Scope{
		Self:   self,
		Skip:   skip,
		Name:   "session " + s.id + ": task " + t.id,
		Slice:  t.leaf,
		Seeds:  map[int]uint64{t.pid: t.start},
		Groups: []proc.Handle{t.pin()},
		Marker: EnvTask + "=" + t.id,
	})
	if err != nil {
		err = fmt.Errorf("session %s: task %s: %w", s.id, t.id, err)
	}
	return rep, err
}

// lookup finds a task of this session, not one it cleared.
func (s *Session) lookup(id string) (*task, error) {
	t, cleared, err := s.lookupOutput(id)
	if cleared {
		return nil, s.unknownTask(id)
	}
	return t, err
}

func (s *Session) unknownTask(id string) error {
	return fmt.Errorf("session %s: %w %q (finished tasks are cleared once their output was read to the end, after %v, or when %d more have finished; their output files stay readable until the session's output budget needs the room)",
		s.id, ErrUnknownTask, id, s.r.lim.Retention, s.r.lim.MaxTasks)
}

// lookupOutput finds a task of this session whose output can be read: a task it has, or one it
// cleared whose output file it keeps (its leaf, if it had one, may serve another task by now: only
// its output is read).
func (s *Session) lookupOutput(id string) (t *task, cleared bool, err error) {
	if err := checkTaskID(id); err != nil {
		return nil, false, fmt.Errorf("session %s: %w", s.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tasks[id]; ok {
		return t, false, nil
	}
	for _, t := range s.kept {
		if t.id == id {
			return t, true, nil
		}
	}
	return nil, false, s.unknownTask(id)
}

// clearLocked drops t from the session's tasks, keeping it for reads of its output file if it has
// one, at most taskout.MaxFiles of them, oldest dropped first.
func (s *Session) clearLocked(t *task) {
	delete(s.tasks, t.id)
	if !t.out.HasFile() {
		return
	}
	if len(s.kept) >= taskout.MaxFiles {
		s.kept = slices.Delete(s.kept, 0, len(s.kept)-taskout.MaxFiles+1)
	}
	s.kept = append(s.kept, t)
}

// processes lists the task's live processes.
func (s *Session) processes(t *task) []int {
	if t.leaf != nil {
		pids, _ := t.leaf.Pids()
		return pids
	}
	self, skip, _ := s.walkRoot()
	found, _ := proc.NewWalker().Find(proc.Query{
		Self: self, Seeds: map[int]uint64{t.pid: t.start}, Skip: skip, Marker: EnvTask + "=" + t.id,
	})
	pids := make([]int, len(found))
	for i, p := range found {
		pids[i] = p.Pid
	}
	return pids
}

// info describes t with its live processes, and whether one waits for input.
func (s *Session) info(t *task) TaskInfo { return s.infoOf(proc.NewWalker(), t, s.processes(t)) }

// infoOf describes t, whose live processes are pids, and whether one waits for input.
func (s *Session) infoOf(w *proc.Walker, t *task, pids []int) TaskInfo {
	ti := t.info(len(pids))
	if t.in != nil && ti.Status == Running {
		ti.WaitingForInput = len(s.waitingForInput(w, t, pids)) > 0
	}
	return ti
}

// prune clears finished tasks that are no longer needed: background tasks whose output was read to
// the end or that ended more than Retention ago, foreground ones at once. A task whose leaf still
// holds processes is kept, so that they stay visible; in process containment the task goes and List's
// walk shows its processes. The leaves are read, and those let go of removed, without mu.
func (s *Session) prune() {
	lr := leafRelease{empty: make(map[*task]bool)}
	s.mu.Lock()
	// Only the leaves of tasks that may go are read: those of the finished tasks a session keeps
	// would be read at every call otherwise. A task that becomes one between the two looks (it
	// ends, is read to its end, or is pushed past the cap) goes at the next prune.
	goes := s.overCapLocked()
	for _, t := range s.tasks {
		if t.leaf != nil && (s.prunable(t) || slices.Contains(goes, t)) {
			lr.empty[t] = false
		}
	}
	s.mu.Unlock()
	for t := range lr.empty {
		lr.empty[t] = emptyLeaf(t.leaf)
	}
	s.mu.Lock()
	for _, t := range s.tasks {
		if !s.prunable(t) || !s.releaseLeafLocked(t, &lr) {
			continue
		}
		if t.leaf == nil && !t.background {
			s.rememberLocked(t)
		}
		s.clearLocked(t)
	}
	s.pruneFinishedLocked(&lr)
	s.mu.Unlock()
	s.removeLeaves(lr.remove)
}

// prunable reports whether t finished and is no longer needed: a foreground task, or a background
// one whose output was read to the end or that ended more than Retention ago. It takes t.mu.
func (s *Session) prunable(t *task) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status.Terminal() && (!t.background || t.readToEnd || time.Since(t.ended) > s.r.lim.Retention)
}

// leafRelease is what prune found of the leaves of ended tasks before it took mu (empty: no process
// in them), and the leaves it let go of, to remove once mu is let go.
type leafRelease struct {
	empty  map[*task]bool
	remove []*cgroup.Slice
}

// releaseLeafLocked gives t's leaf back to the session, if it was found empty, and reports whether
// t can be cleared: it has no leaf, or its leaf was let go of.
func (s *Session) releaseLeafLocked(t *task, lr *leafRelease) bool {
	if t.leaf == nil {
		return true
	}
	if !lr.empty[t] {
		return false
	}
	if !s.keepLeafLocked(t.leaf) {
		lr.remove = append(lr.remove, t.leaf)
	}
	return true
}

// maxRecent bounds the foreground commands remembered to name leftovers in process containment.
const maxRecent = 64

// maxKnown bounds the processes a session remembers in process containment.
const maxKnown = 4096

// rememberProcs records processes seen in the session (process containment), so that Close's walk
// starts from them even if they have cleared their marker since. When the record is full, exited
// processes make room (looked at without mu); past that, the newest are not recorded.
func (s *Session) rememberProcs(ps []proc.Stat) {
	if len(ps) == 0 {
		return
	}
	s.mu.Lock()
	var known map[int]uint64
	if len(s.known)+len(ps) > maxKnown {
		known = maps.Clone(s.known)
	}
	s.mu.Unlock()
	var gone []int
	w := proc.NewWalker()
	for pid, start := range known {
		if st, ok := w.Stat(pid); !ok || st.Start != start || st.Dead() {
			gone = append(gone, pid)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		s.known = make(map[int]uint64)
	}
	for _, pid := range gone {
		if s.known[pid] == known[pid] {
			delete(s.known, pid)
		}
	}
	for _, p := range ps {
		if len(s.known) >= maxKnown {
			return
		}
		s.known[p.Pid] = p.Start
	}
}

func (s *Session) rememberLocked(t *task) {
	if s.recent == nil {
		s.recent = make(map[string]string)
	}
	if len(s.recent) >= maxRecent {
		for id := range s.recent { // forget an arbitrary one: only names are lost
			delete(s.recent, id)
			break
		}
	}
	s.recent[t.id] = t.command
}

// Close ends the session: every process it started dies (see the package documentation), its slice
// is removed, and starting tasks fails from then on. It is idempotent and safe to call concurrently;
// every call returns the report of the one teardown. The first call runs it and returns when it is
// done (cancelling ctx cuts the grace period short); later calls return then, or when ctx is done
// first. Processes that outlive the deadline are listed in the report and the error. The end is
// logged with the reason "closed" (see CloseFor).
func (s *Session) Close(ctx context.Context) (KillReport, error) {
	return s.CloseFor(ctx, "closed")
}

// Killed returns a channel that is closed once a teardown (see Close) has killed every process of the
// session and waited for them (or reported those that outlived the deadline). What is left then is
// removing the session's cgroup and files, which a caller (an HTTP DELETE) need not wait for.
func (s *Session) Killed() <-chan struct{} { return s.killed }

// CloseFor is Close with the reason the session ends: a short fixed word such as "idle" or "delete",
// never an id or a number, for the log line of the session's end and the Observer (a metric label).
// The first call's reason is the one kept.
func (s *Session) CloseFor(ctx context.Context, reason string) (KillReport, error) {
	s.mu.Lock()
	first := !s.closing
	s.closing = true
	if first {
		s.reason = reason
	}
	s.mu.Unlock()
	if first {
		s.teardown(ctx)
		return s.rep, s.err
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		select {
		case <-s.done: // both were ready: the teardown's result is the answer
		default:
			return KillReport{}, fmt.Errorf("close session %s: %w", s.id, ctx.Err())
		}
	}
	return s.rep, s.err
}

// teardown is Close's work: the kill policy ends every process of the session, its inits and its
// slice (kill.Policy.Terminate), then the tasks' watchers and pumps are let go of and the files go.
func (s *Session) teardown(ctx context.Context) {
	defer close(s.done)
	start := time.Now()
	waitEnd := start.Add(s.r.lim.Grace + s.r.lim.CloseTimeout) // of every wait for killed processes
	// The start under way, if any, ends, and none follows: closing is set.
	s.spawnMu.Lock()
	//lint:ignore SA2001 the lock is taken only to wait for the start under way to end
	s.spawnMu.Unlock()
	cur, inits := s.ns.close()
	// The ready shell first: once it has ended, the session's processes are its tasks' alone.
	s.ready.drop(waitEnd, ctx.Done())
	sc := s.scope(waitEnd, cur, inits)
	s.mu.Lock()
	tasks := s.scopeLocked(&sc)
	s.mu.Unlock()
	s.outputs.Close() // no file is made or completed from now on: the directory goes with them

	var errs []error
	rep, err := s.r.terminate(ctx, sc)
	s.rep = rep
	if err != nil {
		errs = append(errs, err)
	}
	s.endUsage(rep.Usage)
	s.releaseTasks()
	s.recordMu.Lock() // a record being written has finished; none is written from now on
	s.dir.Close()
	if err := s.r.dir.RemoveAll(s.name); err != nil {
		errs = append(errs, err)
	}
	s.recordMu.Unlock()
	use, counted := s.usage()
	s.r.forget(s, use)
	s.rep.Duration = time.Since(start)
	if len(errs) > 0 {
		s.err = fmt.Errorf("close session %s: %w", s.id, errors.Join(errs...))
	}
	s.mu.Lock()
	reason, ran := s.reason, s.ran
	s.mu.Unlock()
	end := SessionEnd{ID: s.id, Name: s.name, Reason: reason, Tasks: len(tasks), Lifetime: time.Since(s.created), Report: s.rep, Err: s.err,
		Usage: use, UsageCounted: counted}
	s.r.logEnd(end)
	if ran {
		s.r.obs.SessionEnded(end)
	}
}

// scope is the scope of the session's teardown (kill.Scope), as far as it is read without mu: with a
// PID namespace the walks look below its current init cur, and the teardown ends every init it had;
// the escapee check looks under the Reaper's adopters.
func (s *Session) scope(waitEnd time.Time, cur *pidns.Init, inits []*pidns.Init) kill.Scope {
	sc := kill.Scope{Name: "session " + s.id, End: waitEnd, Inits: inits, Killed: s.killed, RemoveSlice: true,
		Seeds: make(map[int]uint64)}
	if cur != nil {
		sc.Self, sc.Skip = cur.Pid(), cur.Registered()
		sc.Seeds[sc.Self] = cur.StartTime()
		sc.Known = map[int]bool{sc.Self: true}
		sc.Namespaced = true // every task was born in one (sessionNS.use)
	} else {
		sc.Self, sc.Skip = s.r.pid, s.r.kids.Registered()
	}
	// Read before mu is taken: it takes the other sessions' (process containment).
	esc := s.r.escapees("session "+s.id+" ended", s)
	sc.Escapees = &esc
	return sc
}

// scopeLocked completes sc with what the session holds (its slice, its running tasks' main processes
// pinned, the processes it remembers), and returns its tasks.
func (s *Session) scopeLocked(sc *kill.Scope) []*task {
	tasks := make([]*task, 0, len(s.tasks))
	sc.Slice = s.slice
	for _, t := range s.tasks {
		tasks = append(tasks, t)
		if t.stopping(Killed) {
			sc.Seeds[t.pid] = t.start
			sc.Groups = append(sc.Groups, t.pin())
			sc.Exits = append(sc.Exits, t.done)
		}
	}
	for pid, start := range s.known {
		sc.Seeds[pid] = start
	}
	if s.ran {
		sc.Marker = s.marker // only then can a process carry it
	}
	// Escapees die by their session's end at the latest (see adopted_linux.go). Without a namespace
	// every process of the session descends from the Reaper, the child subreaper, an adopter: what
	// left the slice is its escapee once its parent has died.
	esc := sc.Escapees
	if !sc.Namespaced && s.slice != nil && !slices.ContainsFunc(esc.Adopters, func(a kill.Adopter) bool { return a.Pid == s.r.pid }) {
		esc.Adopters = append(esc.Adopters, kill.Adopter{Pid: s.r.pid, Started: sc.Skip})
	}
	return tasks
}

// releaseTasks lets go of the tasks once the teardown has waited for their ends (kill.Scope.Exits):
// whatever will not exit is abandoned, and every output pump stops.
func (s *Session) releaseTasks() {
	close(s.abandon)
	// Those of cleared tasks too: a process that survived its kill (in D state) may hold a pipe.
	s.mu.Lock()
	pumps := slices.Collect(maps.Keys(s.pumps))
	s.mu.Unlock()
	for _, p := range pumps {
		p.Abort()
	}
	s.wg.Wait()
}
