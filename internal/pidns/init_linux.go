package pidns

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// InitArg is the first argument that makes this program the init of a PID namespace (see Main). The
// program dispatches on it before it does anything else: cmd/reaper from its earliest package
// initialisation (cmd/reaper/internal/early), before the libraries the init never uses initialise.
const InitArg = "--pidns-init"

// The init's arguments after InitArg: its mode, and its idle period (a duration; 0: none). modeUserNS
// says it runs in a user namespace of its own, where it was given CAP_SYS_ADMIN as an ambient
// capability to mount /proc, which its tasks must not inherit.
const (
	modeUserNS = "userns"
	modePlain  = "plain"
)

// initFD is the descriptor of the init's end of the socket.
const initFD = 3

// IsInit reports whether args (os.Args) ask for the init.
func IsInit(args []string) bool { return len(args) > 1 && args[1] == InitArg }

// initSignals are the signals the init must ask for: those whose default in a Go program ends it
// (HUP, INT, TERM; QUIT, ABRT and the faults, which crash it when sent by kill(2)) or stops it (TSTP,
// TTIN, TTOU). A task may not end its namespace by signalling its init (the kernel delivers a signal
// sent from inside the namespace to its init only when the init handles it, and Go installs handlers
// for every signal), and a signal sent to the server's process group must not end it either. The init
// does nothing with them. Every other signal Go already catches and does nothing with (USR1, PIPE,
// ALRM, ...): asking for those too would cost a round trip to the runtime's signal-mask thread each.
// Handled, not ignored: a handled signal is reset to its default in a child, an ignored one would
// stay ignored in every task. SIGKILL from outside the namespace still ends it.
var initSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGABRT,
	syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
	syscall.SIGSTKFLT, syscall.SIGSYS, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGSEGV,
}

// Main is the init (see the package documentation). It returns the process's exit status: 0 when the
// server has gone, 2 when the program was not started as an init.
func Main() int {
	// Pid 1: the mounts below are made in a mount namespace of the init's own, never the host's.
	typ, err := unix.GetsockoptInt(initFD, unix.SOL_SOCKET, unix.SO_TYPE)
	if os.Getpid() != 1 || err != nil || typ != unix.SOCK_SEQPACKET {
		fmt.Fprintf(os.Stderr, "reaper: %s is the init of a session's PID namespace; reaper starts it itself\n", InitArg)
		return 2
	}
	unix.CloseOnExec(initFD)
	// Not dumpable: a task running as the init's user cannot ptrace it or read its memory.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Asking for a signal Go may deliver unasked is a round trip to the runtime's signal-mask thread
	// (tens of microseconds each on a small VM): it runs while the init mounts /proc and says hello,
	// and serve waits for it before it reads the first request, so no task starts before it is done.
	asked := make(chan struct{})
	go func() {
		sigs := make(chan os.Signal, 16)
		signal.Notify(sigs, initSignals...)
		close(asked)
		for range sigs {
		}
	}()
	c, err := newConn(initFD, "pidns")
	if err != nil {
		fmt.Fprintf(os.Stderr, "reaper: the init of a PID namespace: %v\n", err)
		return 1
	}
	in := &initProc{conn: c, userNS: len(os.Args) > 2 && os.Args[2] == modeUserNS, hostProc: -1}
	hello := in.setUp()
	in.kids = reap.NewChildren()
	if err := c.send(msgHello, 0, hello, nil); err != nil {
		return 0 // the server is gone already
	}
	if len(os.Args) > 3 {
		if idle, err := time.ParseDuration(os.Args[3]); err == nil && idle > 0 {
			go in.exitWhenIdle(idle)
		}
	}
	<-asked
	if err := in.serve(); !errors.Is(err, io.EOF) { // serve returns only with an error: EOF when the server went
		fmt.Fprintf(os.Stderr, "reaper: the init of a PID namespace stops: %v\n", err)
		return 1
	}
	return 0 // the kernel kills what is left in the namespace
}

// initProc is the init's state.
type initProc struct {
	conn     *conn
	userNS   bool
	hostProc int  // the server's /proc, opened before ours was mounted over it; -1 if it could not be
	procOK   bool // /proc is the namespace's own
	kids     *reap.Children
	sendMu   sync.Mutex // one message at a time on the socket
	spawnMu  sync.Mutex // held while a request is handled, and by the idle exit

	// The threads tasks are forked from, started on first use: plain, and with no_new_privs for
	// tasks with credentials. Only serve's goroutine uses them.
	plain, nnp *reap.Forker
}

// setUp keeps a handle of the server's /proc, stops mounts from propagating back to the host, and
// mounts a /proc of the namespace. It returns the hello message's payload: what worked.
func (in *initProc) setUp() []byte {
	var e encoder
	fd, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		in.hostProc = fd
	}
	// MS_SLAVE rather than MS_PRIVATE: tasks still see what the host mounts later.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		e.u32(0)
		e.str(fmt.Sprintf("making the mounts slaves: %v", err))
		return e.b
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		e.u32(0)
		e.str(fmt.Sprintf("mounting /proc: %v", err))
		return e.b
	}
	in.procOK = true
	e.u32(helloProc)
	e.str("")
	return e.b
}

// serve reads requests until the server goes.
func (in *initProc) serve() error {
	buf := make([]byte, maxChunk+2)
	for {
		typ, payload, fds, err := in.readRequest(buf)
		if err != nil {
			closeAll(fds)
			return err
		}
		if typ != msgSpawn {
			closeAll(fds)
			return protocolError("message type %d from the server", typ)
		}
		req, err := decodeSpawn(payload, fds)
		if err != nil {
			closeAll(fds)
			return err
		}
		in.spawnMu.Lock()
		in.spawn(req)
		in.spawnMu.Unlock()
		closeAll(fds)
	}
}

// exitWhenIdle ends the init once its namespace has been empty (the init has no child, not even a
// zombie) for idle: an idle session then holds no process, and its next command starts a new init. It
// says so first, under spawnMu, so that the server knows that whatever it asked and got no answer to
// was not started, and may ask a new init.
func (in *initProc) exitWhenIdle(idle time.Duration) {
	tick := time.NewTicker(min(idle/4, time.Second))
	defer tick.Stop()
	busy := time.Now()
	for range tick.C {
		if reap.HasChildren() {
			busy = time.Now()
			continue
		}
		if time.Since(busy) < idle {
			continue
		}
		in.spawnMu.Lock()
		if reap.HasChildren() { // one was started meanwhile
			in.spawnMu.Unlock()
			busy = time.Now()
			continue
		}
		in.reply(msgIdle, nil, -1)
		os.Exit(0) // with spawnMu held: nothing more is started
	}
}

// readRequest reads one request, joining its chunks, up to maxRequest bytes.
func (in *initProc) readRequest(buf []byte) (byte, []byte, []int, error) {
	var all []byte
	var fds []int
	for first := true; ; first = false {
		typ, flags, payload, got, err := in.conn.recv(buf, maxFDs)
		fds = append(fds, got...)
		switch {
		case err != nil:
			return 0, nil, fds, err
		case !first && len(got) > 0:
			return 0, nil, fds, protocolError("descriptors on a later chunk")
		case !first && typ != msgSpawn:
			return 0, nil, fds, protocolError("a chunk of type %d in a request", typ)
		case len(all)+len(payload) > maxRequest:
			return 0, nil, fds, protocolError("a request over %d bytes", maxRequest)
		}
		if first && flags&flagMore == 0 {
			return typ, payload, fds, nil
		}
		all = append(all, payload...)
		if flags&flagMore == 0 {
			return typ, all, fds, nil
		}
	}
}

// spawn starts one task and answers: its pid, start time and pidfd, or why it failed. The answer is
// sent before the task is registered with the child reaper, whose lock is held across the fork, so the
// task's exit can be reported only after it; a goroutine reports that.
func (in *initProc) spawn(r spawnRequest) {
	pidfd := -1
	sys := &syscall.SysProcAttr{
		Setpgid: r.setpgid, Setsid: r.setsid, Setctty: r.setctty, Foreground: r.fg, Ctty: r.ctty,
		Credential: r.cred, PidFD: &pidfd,
	}
	if r.fg {
		// For Foreground, Go wants the terminal as a descriptor of the parent: the init's copy.
		sys.Ctty = r.files[r.ctty]
	}
	if r.cgroup >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, r.cgroup
	}
	files := make([]uintptr, len(r.files))
	for i, fd := range r.files {
		files[i] = uintptr(fd)
	}
	attr := &syscall.ProcAttr{Dir: r.dir, Env: r.env, Files: files, Sys: sys}
	_, exited, err := in.kids.Start(func() (int, error) {
		pid, err := in.forkExec(r.argv, attr, r.cred != nil)
		if err != nil {
			return 0, err
		}
		var e encoder
		host, start := in.identify(pid, pidfd)
		e.u64(r.id)
		e.u64(uint64(host))
		e.u64(uint64(pid))
		e.u64(start)
		in.reply(msgSpawned, e.b, pidfd)
		unix.Close(pidfd)
		return pid, nil
	})
	if err != nil {
		var e encoder
		e.u64(r.id)
		var errno syscall.Errno
		errors.As(err, &errno)
		e.u32(uint32(errno))
		msg := fmt.Sprintf("start %s: %v", r.argv[0], err)
		e.str(msg[:min(len(msg), maxErrorMsg)])
		in.reply(msgFailed, e.b, -1)
		return
	}
	go func() {
		st := <-exited
		var e encoder
		e.u64(r.id)
		e.u32(uint32(st.Status))
		in.reply(msgExit, e.b, -1)
	}()
}

// reply sends a message to the server, with a descriptor if fd >= 0. A failure means the server is
// gone, which the next read sees.
func (in *initProc) reply(typ byte, payload []byte, fd int) {
	var fds []int
	if fd >= 0 {
		fds = []int{fd}
	}
	in.sendMu.Lock()
	defer in.sendMu.Unlock()
	in.conn.send(typ, 0, payload, fds)
}

// forkExec forks, on one of the init's forking threads where the thread matters: with no_new_privs
// for tasks with credentials, and, in a user namespace, without the ambient capability the init was
// given to mount /proc, so that no task inherits it. Otherwise from any thread: a hand-off to a
// locked thread costs a task's start a scheduling round.
func (in *initProc) forkExec(argv []string, attr *syscall.ProcAttr, nnp bool) (pid int, err error) {
	if !nnp && !in.userNS {
		return syscall.ForkExec(argv[0], argv, attr)
	}
	f := &in.plain
	if nnp {
		f = &in.nnp
	}
	if *f == nil {
		if *f, err = reap.StartForker(func() error { return in.forkerSetUp(nnp) }); err != nil {
			return 0, err
		}
	}
	(*f).Run(func() { pid, err = syscall.ForkExec(argv[0], argv, attr) })
	return pid, err
}

func (in *initProc) forkerSetUp(nnp bool) error {
	if in.userNS {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fmt.Errorf("clear the ambient capabilities of the forking thread: %w", err)
		}
	}
	if nnp {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("set no_new_privs for tasks that run as another user: %w", err)
		}
	}
	return nil
}

// identify returns the task's pid as the server sees it and its start time, read through the server's
// /proc while the task cannot be reaped (the caller holds the child reaper's lock): the pidfd's
// fdinfo names the pid in the namespace of the /proc it is read through. Zero values where that
// /proc is not at hand; then the start time comes from the namespace's own /proc, if it was mounted.
func (in *initProc) identify(nspid, pidfd int) (host int, start uint64) {
	if in.hostProc >= 0 {
		if b, ok := readAt(in.hostProc, "self/fdinfo/"+strconv.Itoa(pidfd)); ok {
			host = fdinfoPid(b)
		}
		if host > 0 {
			if b, ok := readAt(in.hostProc, strconv.Itoa(host)+"/stat"); ok {
				st, _ := proc.ParseStat(host, b)
				return host, st.Start
			}
		}
	}
	if !in.procOK {
		return host, 0 // /proc is the host's: nspid names another process there
	}
	st, _ := proc.NewWalker().Stat(nspid)
	return host, st.Start
}

// readAt reads a small file below dir.
func readAt(dir int, name string) ([]byte, bool) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	buf := make([]byte, 2048)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return buf[:n], true
}

// fdinfoPid returns the "Pid:" of a pidfd's fdinfo: the pid in the namespace of the /proc it was read
// through, -1 once the process has been reaped, 0 if it cannot be seen from there.
func fdinfoPid(b []byte) int {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Pid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}
