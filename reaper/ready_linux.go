package reaper

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/shell"
	"golang.org/x/sys/unix"
)

// A ready shell. Most of a short command's round trip is its shell's start (the fork, the exec of
// bash, the dynamic loader, bash's initialisation: about 0.9 ms of the 1.8 ms an `echo hi` takes over
// MCP on a 2-core VM). So a session that has run two foreground commands keeps a bash started ahead
// for its next one, from the end of the last: born as that command's shell would be (program, user,
// environment and markers, directory, leaf, PID namespace, output and working-directory pipes; a
// task id of its own), but running shell.Loader, which waits for the command. Starting the command
// writes it and lets the shell go: nothing is forked on the path the caller waits on.
//
// The loader waits until the gate (a pipe) is closed, reads the script from a memory file and evals
// it. That differs from `bash -c script` only in what names the script's source (a syntax error reads
// "bash: eval: line 1:", and $BASH_EXECUTION_STRING and ps show the loader); the process tree, $0,
// $$, $LINENO, error messages, the exit status, exit, exec, traps and errexit are the same
// (TestReadyShellRunsAsBashC compares them).
//
// The shell is left unused, and ends, where the next command is not a plain foreground one, where the
// session's working directory changed, where the shell or the session's PID namespace died, and after
// shellIdle; it is killed and reaped like any task, and its leaf goes back to the session. The
// teardown kills it first. In a PID namespace the init ends with an idle shell where nothing else ran
// meanwhile (see life). Only bash (Reaper.keepShell): the loader is bash's.

// readyShellIdle is how long a ready shell waits for a command before it is ended: as long as an
// init lives on in an empty namespace (initIdle), the pause an agent's turn takes, most of the time.
const readyShellIdle = initIdle

// readyShell is a session's ready shell: the shell started ahead for its next foreground command, if
// it has one, and what decides when it gets one. Its methods are safe for concurrent use.
//
// Each shell it starts has one owner at a time, and its fate (taken by a command, or dropped) is
// decided once, by whoever takes it out of cur: a command (take), the teardown (drop), or its own
// life goroutine (life) once it has waited for shellIdle, died or been abandoned.
type readyShell struct {
	s *Session // fixed at creation

	// mu guards the fields that follow. A leaf, never held across a fork, an exec, a wait or a
	// write to the shell.
	mu         sync.Mutex
	foreground int        // foreground commands started: from the second on, a ready shell is kept
	cur        *readyProc // the shell started ahead, or nil
	preparing  bool       // a goroutine is about to start one, or starting it
	closed     bool       // the teardown let go of it: none is started any more
}

// readyProc is one shell started ahead.
type readyProc struct {
	t       *task     // the task it becomes: its id, output and pump, leaf, working-directory pipe, main process
	sp      spawned   // the shell's process
	started time.Time // when it was started: the end of the session's last foreground command
	dir     string    // the session's working directory it started in
	command *os.File  // the memory file the command is written into (the shell's shell.CommandFD)
	gate    *os.File  // the write end of the pipe it waits on (its shell.GateFD); closing it lets the shell go
	// claimed is closed when a command takes the shell, dropped when the session lets go of it
	// unused: one of them, once, by whoever took it out of readyShell.cur.
	claimed, dropped chan struct{}
	gone             chan struct{} // closed once an unused shell has exited and its files are closed
}

// ranForeground counts a foreground command started.
func (rs *readyShell) ranForeground() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.foreground++
}

// id returns the task id of the shell started ahead, "" without one.
func (rs *readyShell) id() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.cur == nil {
		return ""
	}
	return rs.cur.t.id
}

// keep starts a ready shell in the background for the session's next foreground command, if the
// session has run two and has none. It is called once a foreground command has ended.
func (rs *readyShell) keep() {
	s := rs.s
	if !s.r.keepShell || s.isClosing() {
		return
	}
	rs.mu.Lock()
	want := !rs.closed && rs.cur == nil && !rs.preparing && rs.foreground >= 2
	if want {
		rs.preparing = true
		s.wg.Add(1) // before drop has closed it: the teardown waits for wg after drop
	}
	rs.mu.Unlock()
	if want {
		go rs.prepare()
	}
}

// prepare starts a ready shell, as any task is started (under spawnMu: the teardown waits for it, and
// lets go of the shell it made), and makes it the session's; then life owns it. The session's wg
// counts it.
func (rs *readyShell) prepare() {
	s := rs.s
	defer s.wg.Done()
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	var p *readyProc
	if !s.isClosing() {
		var err error
		if p, err = rs.start(); err != nil {
			// The next command starts its own shell, and says what fails, if it does.
			s.r.log.Debug("no ready shell", "session", s.id, "error", err)
		}
	}
	// preparing ends as the shell becomes the session's: no look sees neither. Then the shell's task
	// is no longer the one being started (a listing takes neither's processes for leftovers).
	rs.mu.Lock()
	rs.preparing = false
	if p != nil {
		if rs.closed {
			close(p.dropped)
		} else {
			rs.cur = p
		}
		s.wg.Add(1)
	}
	rs.mu.Unlock()
	if p != nil {
		s.setStarting("")
		go rs.life(p)
	}
}

// start starts a shell ahead, as launch starts a foreground task, with the loader for its command.
// spawnMu is held, as for any start.
func (rs *readyShell) start() (*readyProc, error) {
	s := rs.s
	id := newID("t-")
	t := &task{id: id, status: Running, done: make(chan struct{}), out: s.outputs.New(id + ".out")}
	p := &readyProc{t: t, dir: s.Cwd(), started: time.Now(), claimed: make(chan struct{}), dropped: make(chan struct{}), gone: make(chan struct{})}
	fd, err := unix.MemfdCreate("reaper-command", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("ready shell: memfd_create: %w", err)
	}
	p.command = os.NewFile(uintptr(fd), "reaper-command")
	var pp [2]int
	if err := unix.Pipe2(pp[:], unix.O_CLOEXEC); err != nil {
		p.command.Close()
		return nil, fmt.Errorf("ready shell: gate pipe: %w", err)
	}
	gate := os.NewFile(uintptr(pp[0]), "gate")
	defer gate.Close() // the shell's end, which it has once started
	p.gate = os.NewFile(uintptr(pp[1]), "gate")
	l := launch{command: p.command, gate: gate}
	if p.sp, _, err = s.launch(t, func(in *pidns.Init) (spawned, string, error) { return s.launchIn(in, t, "", l) }); err != nil {
		p.command.Close()
		p.gate.Close()
		return nil, fmt.Errorf("ready shell: %w", err)
	}
	return p, nil
}

// take hands the ready shell command (see shell.Script) and returns the task it now runs, where the
// session has one, the command is a plain foreground one, cwd is the one the shell started in, and
// the shell and the session's PID namespace are alive. Otherwise it lets go of the shell and reports
// false: the caller starts a shell itself. listed is the command as listed; base is the slice's hits
// before the command (see hitsBase). spawnMu is held.
func (rs *readyShell) take(command, listed, cwd string, l launch, base cgroup.Hits) (*task, spawned, bool) {
	if l.background || l.stdin || l.tty != nil {
		return nil, spawned{}, false
	}
	rs.mu.Lock()
	p := rs.cur
	rs.cur = nil
	rs.mu.Unlock()
	if p == nil {
		return nil, spawned{}, false
	}
	// p is this call's to claim or drop.
	s := rs.s
	p.t.base.slice = base // before the command runs; its watcher reads it once claimed is closed
	// A working directory removed since the shell started in it (by a task, or anything else on
	// the machine) leaves the shell in a directory of no name: the caller's own start finds it gone
	// and goes back to the session's first one, with a notice.
	if in := s.ns.current(); p.dir != cwd || p.t.hasExited() || in != nil && in.Err() != nil ||
		p.sp.pid > 0 && proc.CwdRemoved(p.sp.pid) ||
		p.send(shell.Script(command, true, s.r.dupCwd, s.r.bash)) != nil {
		close(p.dropped)
		return nil, spawned{}, false
	}
	t, sp := p.t, p.sp // read before claimed is closed: life owns p from then on
	t.command, t.description, t.started = listed, l.description, time.Now()
	close(p.claimed)
	return t, sp, true
}

// send writes the script, ended by a NUL (which no command holds), into the shell's memory file at
// its start (the shell reads it from there: its offset, shared with this descriptor, stays 0), seals
// the file against every change, checks that it holds the script, and lets the shell go.
//
// The seal and the check are for processes that may open the file through /proc/<pid>/fd (those of
// another session of the same user, without PID namespaces: see docs/security.md): what they wrote
// before is overwritten up to the NUL, or ignored after it; what they write between the write and
// the seal fails the check, and the shell is not used. The gate lets the shell go only at its end
// (see shell.Loader), which such a process cannot bring about while this one holds the write end.
func (p *readyProc) send(script string) error {
	fd := int(p.command.Fd())
	b := make([]byte, 0, len(script)+1)
	b = append(append(b, script...), 0)
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("ready shell %d: write the command: %w", p.t.pid, err)
		}
		off += n
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fmt.Errorf("ready shell %d: seal the command: %w", p.t.pid, err)
	}
	back := make([]byte, len(b))
	if n, err := unix.Pread(fd, back, 0); err != nil || n != len(b) || !bytes.Equal(back, b) {
		return fmt.Errorf("ready shell %d: the command file does not hold the command (read %d bytes: %v)", p.t.pid, n, err)
	}
	p.command.Close()
	return p.gate.Close()
}

// life is the owner of a shell started ahead: until a command takes it, it waits; then it is the
// task's watcher (watch). Unused (dropped, idle for shellIdle, dead, or abandoned by the teardown),
// it ends the shell, waits for its exit, lets go of its files and its leaf, and closes gone. The
// session's wg counts it.
func (rs *readyShell) life(p *readyProc) {
	s := rs.s
	var exit reap.Exit
	exited, idled := false, false
	select {
	case <-p.claimed:
	case <-p.dropped:
	case <-time.After(s.r.shellIdle):
		idled = true
	case exit = <-p.sp.exited:
		exited = true
	case <-s.abandon:
	}
	// Still the session's ready shell: nothing can take it from now on. Otherwise whoever took it
	// out decides, at once (take writes the command first), whether it runs a command.
	rs.mu.Lock()
	if rs.cur == p {
		rs.cur = nil
		close(p.dropped)
	}
	rs.mu.Unlock()
	select {
	case <-p.claimed:
		if exited { // taken as it died: the task sees that death
			ch := make(chan reap.Exit, 1)
			ch <- exit
			p.sp.exited = ch
		}
		s.watch(p.t, p.sp)
		return
	case <-p.dropped:
	}
	defer s.wg.Done()
	defer close(p.gone)
	p.command.Close()
	p.gate.Close()
	if !exited {
		p.t.kill()
		select {
		case <-p.sp.exited:
		case <-s.abandon:
			// The teardown gave up on processes that do not die (in D state): the leaf stays
			// populated (the teardown reports it), and the shell's files are let go of below.
		}
	}
	p.t.exited()
	p.t.pump.Close()
	p.t.closeCwd()
	if s.isClosing() {
		return // the teardown removes the slice, this leaf with it, and ends the init
	}
	s.releaseLeaf(p.t.leaf)
	if in := s.ns.current(); idled && in != nil && s.quietSince(p.started) {
		// Its namespace has been idle for the init's own idle period (shellIdle is initIdle), which
		// the shell, a process of that namespace, held back.
		in.EndIdle() // refused while a task runs, or an orphan lives in the namespace
	}
}

// drop lets go of the session's ready shell, if it has one, and starts none any more; it waits until
// the shell has ended, until end or wait is done. The teardown calls it first (a live shell is a
// process in the session's slice and its namespace), once no start is under way.
func (rs *readyShell) drop(end time.Time, wait <-chan struct{}) {
	rs.mu.Lock()
	rs.closed = true
	p := rs.cur
	rs.cur = nil
	if p != nil {
		close(p.dropped)
	}
	rs.mu.Unlock()
	if p == nil {
		return
	}
	p.t.kill() // at once, rather than when life has woken up to it
	select {
	case <-p.gone:
	case <-time.After(time.Until(end)):
	case <-wait:
	}
}

// quietSince reports whether no task of the session has ended since t: a task still running, or one
// that ended after a ready shell started at t, keeps the session's init to its own idle clock.
func (s *Session) quietSince(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tk := range s.tasks {
		if tk.endedAt().After(t) {
			return false
		}
	}
	return true
}
