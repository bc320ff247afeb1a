package pidns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds the wait for an init to say it is ready, and for each of its answers.
const DefaultTimeout = 30 * time.Second

// Options configures Start. Forker and Children are required.
type Options struct {
	// Path is the program run as the init: this program, whose main runs RunInit when IsInit. Empty
	// means /proc/self/exe.
	Path string
	// Name is the init's argv[0], what ps shows of it; empty means "reaper-init".
	Name string
	// UserNS also creates a user namespace, in which this process's uid and gid are mapped to
	// themselves: the way for a process without CAP_SYS_ADMIN, where unprivileged user namespaces are
	// allowed. The tasks then see every other user's and group's files as owned by nobody, and
	// set-user-ID and file-capability programs gain no privilege in them.
	UserNS bool
	// NoUserNS keeps Probe from trying a user namespace where the namespaces cannot be
	// made directly: for tasks that run as other users (reaper.Options.User), whose ids such a
	// namespace would not map (switching to them there fails). Start ignores it.
	NoUserNS bool
	// IPC also creates an IPC namespace: the tasks' System V IPC objects and POSIX message queues are
	// the namespace's, seen by no other, and die with it.
	IPC bool
	// PrivateTmp has the init mount a tmpfs of the namespace's own on /tmp and /dev/shm: the tasks'
	// files there are seen by no other namespace, and die with it (Mode.PrivateTmp says whether it
	// could).
	PrivateTmp bool
	// Cgroup, if set, is an O_PATH descriptor of the cgroup directory the init is born in.
	Cgroup *os.File
	// Stderr is where the init writes if it fails (a crash); nil means /dev/null.
	Stderr *os.File
	// Forker is the thread the init is forked from. The init's parent-death signal, SIGKILL, fires when
	// that thread ends, so it must live as long as the init may.
	Forker *reap.Forker
	// Children is the child reaper that reaps the init.
	Children *reap.Children
	// Timeout bounds the wait for the init to be ready and for each answer to a spawn; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Idle, if positive, ends the init once its namespace has been empty that long (no process in it
	// but the init): Spawn then fails with ErrIdle, and a new init can be started. Zero means never.
	// The server decides it (see idleCheck), not the init: it knows which spawns are under way.
	Idle time.Duration
}

// Init is the server's side of one init: the namespace's process factory. Its methods are safe for
// concurrent use.
type Init struct {
	// The fields up to mu are fixed at creation.
	pid     int
	start   uint64
	conn    *sock // the server's end of the socket; closed by Close once the reader has returned
	timeout time.Duration
	procOK  bool
	tmpOK   bool     // a private /tmp and /dev/shm were mounted (Options.PrivateTmp)
	devpts  *os.File // O_PATH, the root of the namespace's devpts instance; nil without one
	note    string
	idle    time.Duration    // Options.Idle
	exited  <-chan reap.Exit // the init's own exit, from the server's child reaper: read by the reader only
	stop    chan struct{}    // closed by Close: the reader stops waiting for the init's exit
	done    chan struct{}    // closed when the reader has returned; status is set before if ended
	closing sync.Once
	sendMu  sync.Mutex // one request at a time on the socket: a request may take several messages

	// mu guards the fields that follow.
	mu     sync.Mutex
	pidfd  int // the init's, until Close; -1 after
	next   uint64
	calls  map[uint64]*call
	empty  bool      // the last exit the init reported said its namespace was empty then
	quiet  time.Time // when the last request or process ended (or the init started): the idle clock
	err    error     // set once the init takes no more requests
	ended  bool      // the init's exit was seen
	status reap.Exit // that exit

	sigs  map[uint64]chan syscall.Errno // signal requests waiting for their answer, by id
	sigID uint64                        // the last signal request's id
}

// call is one spawn, from its request to its exit.
type call struct {
	reply   chan reply     // receives the answer exactly once (buffered)
	exit    chan reap.Exit // receives the task's exit exactly once (buffered)
	spawned bool           // the answer was a pid
	pid     int            // the task's pid as the server sees it, once spawned
}

type reply struct {
	task Task
	err  error
}

// Task is a process an init started.
type Task struct {
	// Pid is the process's pid as this process sees it. It is 0 in the rare case where it could not be
	// read (the task had already ended and been reaped when the init looked); Exited still reports it.
	Pid int
	// NSPid is its pid inside the namespace.
	NSPid int
	// Start is its start time (field 22 of /proc/<pid>/stat); 0 with Pid.
	Start uint64
	// PidFD is a pidfd of the process, owned by the caller; -1 if none came.
	PidFD int
	// Exited receives the process's exit exactly once. If the init dies first, the kernel kills every
	// process of the namespace, and Exited receives a death by SIGKILL once the init has ended.
	Exited <-chan reap.Exit
}

// SpawnError is a spawn the init refused or failed; it wraps the errno (ENOSYS for a refused clone3,
// ENOENT for a missing program), so errors.Is works on it.
type SpawnError struct {
	Errno syscall.Errno
	Msg   string
}

func (e *SpawnError) Error() string { return e.Msg }
func (e *SpawnError) Unwrap() error { return e.Errno }

// ErrEnded is wrapped by the errors of spawns asked of an init that has ended or was closed; ErrIdle
// too where it ended because its namespace was empty for its idle period (Options.Idle). Either way
// the spawn started nothing, and a new init may be asked instead.
var (
	ErrEnded = errors.New("the init of the PID namespace has ended")
	ErrIdle  = errors.New("its namespace was empty for its idle period")
)

// Start starts an init in new PID and mount namespaces (and a user namespace with UserNS) and
// returns once it is ready.
func Start(opts Options) (*Init, error) {
	if opts.Forker == nil || opts.Children == nil {
		return nil, errors.New("pidns: Start needs a Forker and Children")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start the init of a PID namespace: socketpair: %w", err)
	}
	c, err := newSock(pair[0], "pidns")
	if err != nil {
		unix.Close(pair[1])
		return nil, fmt.Errorf("start the init of a PID namespace: %w", err)
	}
	in := &Init{conn: c, timeout: opts.Timeout, idle: max(opts.Idle, 0), pidfd: -1, stop: make(chan struct{}),
		done: make(chan struct{}), calls: make(map[uint64]*call), sigs: make(map[uint64]chan syscall.Errno)}
	err = in.fork(opts, pair[1])
	unix.Close(pair[1])
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("start the init of a PID namespace: %w", err)
	}
	if err := in.awaitHello(); err != nil {
		in.Kill()
		go in.read() // sees the end, waits for the exit the child reaper reports
		in.end()
		return nil, fmt.Errorf("start the init of a PID namespace (pid %d): %w", in.pid, err)
	}
	in.mu.Lock()
	in.armLocked()
	in.mu.Unlock()
	go in.read()
	return in, nil
}

// fork starts the init with its end of the socket as descriptor 3.
func (in *Init) fork(opts Options, end int) error {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	path := cmp.Or(opts.Path, "/proc/self/exe")
	argv := []string{cmp.Or(opts.Name, "reaper-init"), InitArg, modePlain}
	// One P: each more costs the init its caches and a thread (1256 KiB private with two, 1028 with
	// one), and spawns were faster with one (the runtime's monitor hands the P on from the wait
	// loop blocked in waitid). No transparent huge pages for its heap: where the host's setting is
	// "always" its few hundred KiB came in 2 MiB pages (4.0 MiB private instead of 1.4). Tasks get
	// the environment their request carries, never this one.
	env := []string{"GOMAXPROCS=1", "GODEBUG=disablethp=1"}
	sys := &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL, PidFD: &in.pidfd}
	if opts.IPC {
		argv = append(argv, argIPC)
		sys.Cloneflags |= unix.CLONE_NEWIPC
	}
	if opts.PrivateTmp {
		argv = append(argv, argPrivateTmp)
	}
	if opts.UserNS {
		argv[2] = modeUserNS
		sys.Cloneflags |= unix.CLONE_NEWUSER
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		// The init runs as a uid other than 0 in its namespace, so it keeps CAP_SYS_ADMIN across
		// execve only as an ambient capability; it drops it before it forks a task.
		sys.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	if opts.Cgroup != nil {
		sys.UseCgroupFD, sys.CgroupFD = true, int(opts.Cgroup.Fd())
	}
	files := []uintptr{devnull.Fd(), devnull.Fd(), cmp.Or(opts.Stderr, devnull).Fd(), uintptr(end)}
	attr := &syscall.ProcAttr{Env: env, Files: files, Sys: sys}
	in.pid, in.exited, err = opts.Children.Start(func() (pid int, err error) {
		opts.Forker.Run(func() { pid, err = syscall.ForkExec(path, argv, attr) })
		if err == nil {
			st, _ := proc.NewWalker().Stat(pid) // it cannot be reaped while the lock is held
			in.start = st.Start
		}
		return pid, err
	})
	return err
}

// awaitHello reads the init's first message.
func (in *Init) awaitHello() (err error) {
	in.conn.SetReadDeadline(time.Now().Add(in.timeout))
	defer in.conn.SetReadDeadline(time.Time{})
	buf := make([]byte, maxReply+2)
	typ, flags, payload, got, err := in.conn.Recv(buf, 1)
	defer func() {
		if err != nil {
			closeAll(got)
		}
	}()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("not ready within %v", in.timeout)
	case errors.Is(err, io.EOF):
		return errors.New("it ended before it was ready")
	case err != nil:
		return err
	case typ != msgHello || flags != 0:
		return protocolErr("message type %d before the hello", typ)
	}
	d := &decoder{b: payload}
	hello := d.U32("hello")
	in.procOK, in.tmpOK = hello&helloProc != 0, hello&helloTmp != 0
	in.note = d.Str("note")
	want := 0 // the devpts instance's root
	if hello&helloDevpts != 0 {
		want = 1
	}
	if err := d.End("hello"); err != nil {
		return err
	}
	if len(got) != want {
		return protocolErr("a hello with %d descriptors, want %d", len(got), want)
	}
	if want == 1 {
		in.devpts = os.NewFile(uintptr(got[0]), "devpts")
	}
	return nil
}

// Pid returns the init's pid, as this process sees it.
func (in *Init) Pid() int { return in.pid }

// StartTime returns the init's start time (field 22 of /proc/<pid>/stat).
func (in *Init) StartTime() uint64 { return in.start }

// Proc reports whether the init mounted a /proc of its namespace and, if not or where another of its
// mounts failed, why: the tasks' ps then lists the host's processes (which they cannot signal).
func (in *Init) Proc() (bool, string) { return in.procOK, in.note }

// Devpts returns an O_PATH descriptor of the root of the namespace's devpts instance, mounted on its
// /dev/pts, where the tasks' terminals are to be made (see tty.OpenIn); nil where the init could not
// mount one (Proc says why). It stays the Init's: it is closed by Close.
func (in *Init) Devpts() *os.File { return in.devpts }

// Spawn asks the init to start a process, and returns it. It fails with a *SpawnError when the init
// could not start it, with ErrEnded once the init has ended, and when the init does not answer within
// the timeout (a process it starts later is killed as soon as its answer arrives).
func (in *Init) Spawn(r Request) (Task, error) {
	in.mu.Lock()
	if in.err != nil {
		err := in.err
		in.mu.Unlock()
		return Task{}, err
	}
	in.next++
	id := in.next
	in.mu.Unlock()
	payload, fds, err := encodeSpawn(id, r)
	if err != nil {
		return Task{}, fmt.Errorf("start a process in a PID namespace: %w", err)
	}
	c := &call{reply: make(chan reply, 1), exit: make(chan reap.Exit, 1)}
	in.mu.Lock()
	if in.err != nil {
		err := in.err
		in.mu.Unlock()
		return Task{}, err
	}
	in.calls[id] = c
	in.mu.Unlock()
	in.sendMu.Lock()
	err = in.conn.SendChunked(msgSpawn, payload, fds)
	in.sendMu.Unlock()
	if err != nil {
		// A request cut between its chunks would leave the init reading the next one as its rest:
		// it can no longer be talked to (it has most likely ended already).
		in.Kill()
		in.forget(id)
		return Task{}, in.foundEnded(fmt.Errorf("%w (pid %d): sending a request: %w", ErrEnded, in.pid, err))
	}
	select {
	case rep := <-c.reply:
		return rep.task, rep.err
	case <-time.After(in.timeout):
		if in.forget(id) {
			return Task{}, fmt.Errorf("the init of the PID namespace (pid %d) did not answer within %v", in.pid, in.timeout)
		}
		rep := <-c.reply // answered as the time ran out: the reader has put it there
		return rep.task, rep.err
	}
}

// Signal has the init send each of sigs in turn to every other process of its namespace, whatever
// their cgroup, process group or parent (kill(2) with pid -1 inside it: the kernel reaches the
// namespace's processes and those of namespaces below it, and no other), and returns once it has, or
// at deadline or when ctx is done. It fails with ErrEnded once the init has ended or was closed; a
// failure to signal a process other than its having exited comes back wrapped (the processes the init
// could signal were signalled).
func (in *Init) Signal(ctx context.Context, deadline time.Time, sigs ...syscall.Signal) error {
	in.mu.Lock()
	if in.err != nil {
		err := in.err
		in.mu.Unlock()
		return err
	}
	in.sigID++
	id := in.sigID
	answer := make(chan syscall.Errno, 1)
	in.sigs[id] = answer
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.sigs, id)
		in.mu.Unlock()
	}()
	payload, err := encodeSignal(id, sigs)
	if err != nil {
		return fmt.Errorf("signal the PID namespace of init %d: %w", in.pid, err)
	}
	in.sendMu.Lock()
	err = in.conn.Send(msgSignal, 0, payload, nil)
	in.sendMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w (pid %d): sending a request: %w", ErrEnded, in.pid, err)
	}
	select {
	case errno := <-answer:
		if errno != 0 {
			return fmt.Errorf("signal the PID namespace of init %d: %w", in.pid, errno)
		}
		return nil
	case <-in.done:
		return in.Err()
	case <-ctx.Done():
		return fmt.Errorf("signal the PID namespace of init %d: %w", in.pid, ctx.Err())
	case <-time.After(time.Until(deadline)):
		return fmt.Errorf("the init of the PID namespace (pid %d) did not answer a signal request by %v", in.pid, deadline.Format(time.TimeOnly))
	}
}

// foundEnded records err, which wraps ErrEnded, as the reason the init takes no more requests
// unless one is known already, and returns it. A request can find the init dead before the reader
// of its socket has: Err must say so from then on, or a caller that asks for a new init when a spawn
// fails with ErrEnded would be handed this one again.
func (in *Init) foundEnded(err error) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		in.err = err
	}
	return err
}

// forget drops a spawn nobody waits for any more, unless its answer has come; it reports whether it
// dropped it.
func (in *Init) forget(id uint64) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	c, ok := in.calls[id]
	if !ok || c.spawned {
		return false
	}
	delete(in.calls, id)
	in.armLocked()
	return true
}

// Registered returns the pids of the tasks Spawn started whose exits have not been reported yet
// (those whose pid is known).
func (in *Init) Registered() map[int]bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[int]bool, len(in.calls))
	for _, c := range in.calls {
		if c.spawned && c.pid > 0 {
			out[c.pid] = true
		}
	}
	return out
}

// Err returns nil while the init takes requests, and why it does not once it has ended.
func (in *Init) Err() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err
}

// Kill sends the init SIGKILL: the kernel then kills every process of its namespace. It does nothing
// once the init is closed.
func (in *Init) Kill() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pidfd < 0 || in.ended {
		return nil
	}
	if err := unix.PidfdSendSignal(in.pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill the init of the PID namespace (pid %d): %w", in.pid, err)
	}
	return nil
}

// Empty reports whether the init's namespace holds no process but, at most, the init: the init has
// ended (the kernel had killed and reaped everything in its namespace before), or it has no child,
// live or a zombie (every other process of a PID namespace descends from its init: an orphan is
// adopted by it, and no process leaves its namespace). It is false when that cannot be told: when the
// children cannot be read, or the init was closed before its exit was seen. It reads the init's
// threads' children in /proc only where Quiet cannot tell.
func (in *Init) Empty() bool {
	in.mu.Lock()
	ended, closed, quiet := in.ended, in.pidfd < 0, in.quietLocked()
	in.mu.Unlock()
	if ended || closed {
		return ended
	}
	return quiet || in.childless()
}

// childless reports whether the init is known to have no child, live or a zombie, by /proc.
func (in *Init) childless() bool {
	childless, ok := proc.NewWalker().Childless(proc.Stat{Pid: in.pid, Start: in.start})
	return ok && childless
}

// Quiet reports whether the init has no process in its namespace but itself by what it has said:
// no process was asked for, or every one has exited and the last exit it reported said it had no
// child left (a new one comes only from a request: the init sends an exit and handles a request one
// at a time). It reads nothing, and is false where only a look in /proc could tell.
func (in *Init) Quiet() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.quietLocked()
}

// quietLocked is Quiet with in.mu held.
func (in *Init) quietLocked() bool {
	return len(in.calls) == 0 && (in.next == 0 || in.empty)
}

// busyLocked reports whether a process the server asked for may be alive: a request not answered,
// or a task whose exit has not come.
func (in *Init) busyLocked() bool { return len(in.calls) > 0 }

// armLocked restarts the idle clock once the init is no longer busy: the reader looks again when
// the idle period has passed (see idleCheck).
func (in *Init) armLocked() {
	if in.idle <= 0 || in.busyLocked() || in.err != nil {
		return
	}
	in.quiet = time.Now()
	in.conn.SetReadDeadline(in.quiet.Add(in.idle))
}

// idlePoll is how often an init that is not busy but whose namespace holds orphans is looked at again.
const idlePoll = time.Second

// idleCheck runs on the reader when the read deadline has passed. It ends the init (endIdleLocked,
// under mu, which Spawn takes to register its request, so none is lost) if it is not busy, has not
// been for the idle period, and its namespace holds nothing else. Otherwise it sets the next
// deadline: none while busy (the end of the last process sets one), idlePoll while orphans (the
// init's children) are left, which also start the idle clock again, else the rest of the period.
func (in *Init) idleCheck() {
	in.mu.Lock()
	defer in.mu.Unlock()
	now := time.Now()
	if in.err != nil || in.busyLocked() {
		// A read past its deadline fails before it looks at the socket: the deadline goes, so that
		// the reader sees the next message or the end.
		in.conn.SetReadDeadline(time.Time{})
		return
	}
	if !in.quietLocked() {
		if !in.childless() {
			in.quiet = now
			in.conn.SetReadDeadline(now.Add(min(idlePoll, in.idle)))
			return
		}
		in.empty = true
	}
	if rest := in.idle - now.Sub(in.quiet); rest > 0 {
		in.conn.SetReadDeadline(now.Add(rest))
		return
	}
	in.endIdleLocked()
}

// EndIdle ends the init now, as the end of its idle period would (Spawn fails with ErrIdle
// from then on), if nothing is asked of it and its namespace holds no process but the init; it
// reports whether it did. It is for a caller that knows by its own clock that the namespace has been
// idle long enough: a process that caller kept ready in it, and has just ended, held the init's.
func (in *Init) EndIdle() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err != nil || in.busyLocked() || !in.quietLocked() && !in.childless() {
		return false
	}
	in.endIdleLocked()
	return true
}

// endIdleLocked refuses every request from now on and shuts the socket down, at whose end the init
// exits.
func (in *Init) endIdleLocked() {
	in.err = fmt.Errorf("%w (pid %d): %w", ErrEnded, in.pid, ErrIdle)
	in.conn.SetReadDeadline(time.Time{})
	in.conn.Shutdown()
}

// Wait waits until the init has ended (every process of its namespace is gone then: the kernel kills
// them all, and waits for each to be reaped, before the init itself becomes a zombie), the deadline
// passes or ctx is done, and reports whether it has ended.
func (in *Init) Wait(ctx context.Context, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case <-in.done:
	case <-ctx.Done():
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.ended
}

// Close stops talking to the init: the init sees the end of its socket and exits, which kills what
// is left of its namespace. It stops waiting for the init's exit (Wait first, to be sure of it), and
// returns once the reader has returned. It is idempotent.
func (in *Init) Close() {
	in.closing.Do(func() {
		in.foundEnded(fmt.Errorf("%w (pid %d): closed", ErrEnded, in.pid))
		in.conn.Shutdown()
		close(in.stop)
		<-in.done
		in.conn.Close()
		in.mu.Lock()
		if in.pidfd >= 0 {
			unix.Close(in.pidfd)
			in.pidfd = -1
		}
		in.mu.Unlock()
		if in.devpts != nil {
			in.devpts.Close()
		}
	})
}

// read handles the init's messages until its end, then waits for its exit and reports every task whose
// exit never came as killed.
func (in *Init) read() {
	defer close(in.done)
	buf := make([]byte, maxReply+2)
	var err error
	for err == nil {
		typ, flags, payload, fds, rerr := in.conn.Recv(buf, 1)
		switch {
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			in.idleCheck()
		case rerr != nil:
			closeAll(fds)
			err = rerr
		default:
			err = in.handle(typ, flags, payload, fds)
		}
	}
	if !errors.Is(err, io.EOF) {
		// The init broke the protocol, or cannot be read: it cannot be trusted with the namespace.
		in.Kill()
	}
	in.mu.Lock()
	switch {
	case in.err != nil: // closed, ended idle, or found dead by a request (see foundEnded)
	case errors.Is(err, io.EOF):
		in.err = fmt.Errorf("%w (pid %d)", ErrEnded, in.pid)
	default:
		in.err = fmt.Errorf("%w (pid %d): %w", ErrEnded, in.pid, err)
	}
	for id, c := range in.calls {
		if !c.spawned {
			c.reply <- reply{err: in.err}
			delete(in.calls, id)
		}
	}
	in.mu.Unlock()
	select {
	case st := <-in.exited:
		in.mu.Lock()
		in.ended, in.status = true, st
		for id, c := range in.calls {
			c.exit <- reap.Killed(c.pid)
			delete(in.calls, id)
		}
		in.mu.Unlock()
	case <-in.stop:
	}
}

// handle handles one message from the init. It owns fds.
func (in *Init) handle(typ, msgFlags byte, payload []byte, fds []int) error {
	want := 0 // descriptors: a spawned task's pidfd, none with any other message
	if typ == msgSpawned {
		want = 1
	}
	if msgFlags != 0 || len(fds) != want {
		closeAll(fds)
		return protocolErr("message type %d with flags %d and %d descriptors", typ, msgFlags, len(fds))
	}
	d := &decoder{b: payload}
	switch typ {
	case msgSpawned:
		id, host, nspid, start := d.U64("id"), int(int64(d.U64("pid"))), int(int64(d.U64("nspid"))), d.U64("start")
		if err := d.End("spawned"); err != nil {
			unix.Close(fds[0])
			return err
		}
		return in.spawned(id, Task{Pid: host, NSPid: nspid, Start: start, PidFD: fds[0]})
	case msgFailed:
		id, errno, msg := d.U64("id"), syscall.Errno(d.U32("errno")), d.Str("message")
		if err := d.End("failure"); err != nil {
			return err
		}
		in.mu.Lock()
		if c, ok := in.calls[id]; ok && !c.spawned {
			c.reply <- reply{err: &SpawnError{Errno: errno, Msg: msg}}
			delete(in.calls, id)
			in.armLocked()
		}
		in.mu.Unlock()
	case msgExit:
		id, status, flags := d.U64("id"), syscall.WaitStatus(d.U32("status")), d.U32("flags")
		if err := d.End("exit"); err != nil {
			return err
		}
		in.mu.Lock()
		in.empty = flags&exitEmpty != 0
		if c, ok := in.calls[id]; ok && c.spawned {
			c.exit <- reap.Exit{Pid: c.pid, Status: status}
			delete(in.calls, id)
			in.armLocked()
		}
		in.mu.Unlock()
	case msgSignaled:
		id, errno := d.U64("id"), syscall.Errno(d.U32("errno"))
		if err := d.End("signaled"); err != nil {
			return err
		}
		in.mu.Lock()
		if answer, ok := in.sigs[id]; ok {
			answer <- errno // buffered, and sent once: the entry goes now
			delete(in.sigs, id)
		}
		in.mu.Unlock()
	default:
		return protocolErr("message type %d from the init", typ)
	}
	return nil
}

// spawned hands an answer to its caller. The pid the init names must be the one the pidfd refers to,
// as this process's /proc shows it: a pidfd's fdinfo reads -1 once the process is reaped, and then
// the init's word is taken. A process nobody waits for any more is killed.
func (in *Init) spawned(id uint64, t Task) error {
	if seen := pidOfFD(-1, t.PidFD); seen > 0 && seen != t.Pid {
		if t.Pid != 0 {
			unix.Close(t.PidFD)
			return protocolErr("the init named pid %d for a process this process sees as %d", t.Pid, seen)
		}
		t.Pid = seen
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	c, ok := in.calls[id]
	if !ok || c.spawned {
		unix.PidfdSendSignal(t.PidFD, unix.SIGKILL, nil, 0)
		unix.Close(t.PidFD)
		in.empty = false // until its exit, which no call waits for, says otherwise
		return nil
	}
	c.spawned, c.pid = true, t.Pid
	t.Exited = c.exit
	c.reply <- reply{task: t}
	return nil
}

// pidOfFD returns the pid the pidfd fd refers to in the namespace of the /proc that is dir (-1: this
// process's), or 0 (see proc.FdinfoPid).
func pidOfFD(dir, fd int) int {
	var buf [512]byte // a pidfd's fdinfo is a few short lines
	name := "self/fdinfo/" + strconv.Itoa(fd)
	if dir < 0 {
		name = "/proc/" + name
	}
	b, _ := proc.ReadAt(dir, name, buf[:])
	return proc.FdinfoPid(b)
}
