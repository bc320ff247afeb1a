package pidinit

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/cgreaper/reaper/internal/pidwire"
	"github.com/cgreaper/reaper/internal/procstat"
	"github.com/cgreaper/reaper/internal/reap"
)

// initSignals are the signals the init must ask for: those whose default in a Go program ends it
// (HUP, INT, TERM; QUIT, ABRT and the faults, which crash it when sent by kill(2)). A task may not end
// its namespace by signalling its init (the kernel delivers a signal sent from inside the namespace to
// its init only when the init handles it, and Go installs handlers for every signal), and a signal
// sent to the server's process group must not end it either. The init does nothing with them. Every
// other signal Go already catches and does nothing with (USR1, PIPE, ALRM, ...), or leaves at its
// default action, which the kernel ignores for the init of a namespace wherever the signal comes
// from (TSTP, TTIN and TTOU: the init is never stopped but by SIGSTOP from outside): asking for those
// too would cost a round trip to the runtime's signal-mask thread each. Handled, not ignored: a
// handled signal is reset to its default in a child, an ignored one would stay ignored in every task.
// SIGKILL from outside the namespace still ends it.
var initSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGABRT,
	syscall.SIGSTKFLT, syscall.SIGSYS, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGSEGV,
}

// Main is the init (see the package documentation). It returns the process's exit status: 0 when the
// server has gone, 2 when the program was not started as an init.
func Main() int {
	// Pid 1: the mounts below are made in a mount namespace of the init's own, never the host's.
	typ, err := syscall.GetsockoptInt(pidwire.InitFD, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if os.Getpid() != 1 || err != nil || typ != syscall.SOCK_SEQPACKET {
		os.Stderr.WriteString("reaper: " + pidwire.InitArg + " is the init of a session's PID namespace; reaper starts it itself\n")
		return 2
	}
	syscall.CloseOnExec(pidwire.InitFD)
	// Not dumpable: a task running as the init's user cannot ptrace it or read its memory.
	prctl(syscall.PR_SET_DUMPABLE, 0, 0)
	// Asking for a signal Go may deliver unasked is a round trip to the runtime's signal-mask thread
	// (tens of microseconds each on a small VM): it runs while the init mounts /proc and says hello,
	// and serve waits for it before it reads the first request, so no task starts before it is done.
	//
	// SIGCHLD wakes the child reaper's loop, which sleeps while the init has no child: orphans come to
	// the init from processes it did not start (the server forks into the namespace, see
	// pidns.Init.Fork), so no fork of its own says when to look. One wake after asking covers an
	// orphan that exited before.
	kids := reap.NewChildren()
	asked := make(chan struct{})
	go func() {
		sigs := make(chan os.Signal, 16)
		chld := make(chan os.Signal, 1)
		signal.Notify(sigs, initSignals...)
		signal.Notify(chld, syscall.SIGCHLD)
		kids.Wake()
		close(asked)
		for {
			select {
			case <-sigs:
			case <-chld:
				kids.Wake()
			}
		}
	}()
	c, err := pidwire.NewConn(pidwire.InitFD, "pidns")
	if err != nil {
		os.Stderr.WriteString("reaper: the init of a PID namespace: " + err.Error() + "\n")
		return 1
	}
	in := &initProc{conn: c, userNS: len(os.Args) > 2 && os.Args[2] == pidwire.ModeUserNS, hostProc: -1}
	hello := in.setUp()
	in.kids = kids
	if err := c.Send(pidwire.MsgHello, 0, hello, nil); err != nil {
		return 0 // the server is gone already
	}
	<-asked
	if err := in.serve(); !errors.Is(err, io.EOF) { // serve returns only with an error: EOF when the server went
		os.Stderr.WriteString("reaper: the init of a PID namespace stops: " + err.Error() + "\n")
		return 1
	}
	return 0 // the kernel kills what is left in the namespace
}

// initProc is the init's state.
type initProc struct {
	conn     *pidwire.Conn
	userNS   bool
	hostProc int  // the server's /proc, opened before ours was mounted over it; -1 if it could not be
	procOK   bool // /proc is the namespace's own
	kids     *reap.Children
	sendMu   sync.Mutex // one message at a time on the socket
	spawnMu  sync.Mutex // held while a request is handled, and while an exit is reported

	// The threads tasks are forked from, started on first use: plain, and with no_new_privs for
	// tasks with credentials. Only serve's goroutine uses them.
	plain, nnp *reap.Forker
}

// setUp keeps a handle of the server's /proc, stops mounts from propagating back to the host, and
// mounts a /proc of the namespace. It returns the hello message's payload: what worked.
func (in *initProc) setUp() []byte {
	var e pidwire.Encoder
	fd, err := syscall.Open("/proc", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err == nil {
		in.hostProc = fd
	}
	// MS_SLAVE rather than MS_PRIVATE: tasks still see what the host mounts later.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SLAVE, ""); err != nil {
		e.U32(0)
		e.Str("making the mounts slaves: " + err.Error())
		return e.Bytes()
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		e.U32(0)
		e.Str("mounting /proc: " + err.Error())
		return e.Bytes()
	}
	in.procOK = true
	e.U32(pidwire.HelloProc)
	e.Str("")
	return e.Bytes()
}

// serve reads requests until the server goes.
func (in *initProc) serve() error {
	buf := make([]byte, pidwire.MaxChunk+2)
	for {
		typ, payload, fds, err := in.readRequest(buf)
		if err != nil {
			pidwire.CloseAll(fds)
			return err
		}
		if typ == pidwire.MsgSignal {
			id, sigs, err := pidwire.DecodeSignal(payload)
			if err == nil && len(fds) > 0 {
				err = pidwire.ProtocolError("descriptors with a signal request")
			}
			if err != nil {
				pidwire.CloseAll(fds)
				return err
			}
			in.signal(id, sigs)
			continue
		}
		if typ != pidwire.MsgSpawn {
			pidwire.CloseAll(fds)
			return pidwire.ProtocolError("message type " + strconv.Itoa(int(typ)) + " from the server")
		}
		req, err := pidwire.DecodeSpawn(payload, fds)
		if err != nil {
			pidwire.CloseAll(fds)
			return err
		}
		in.spawnMu.Lock()
		in.spawn(req)
		in.spawnMu.Unlock()
		pidwire.CloseAll(fds)
	}
}

// readRequest reads one request, joining its chunks, up to pidwire.MaxRequest bytes.
func (in *initProc) readRequest(buf []byte) (byte, []byte, []int, error) {
	var all []byte
	var fds []int
	for first := true; ; first = false {
		typ, flags, payload, got, err := in.conn.Recv(buf, pidwire.MaxFDs)
		fds = append(fds, got...)
		switch {
		case err != nil:
			return 0, nil, fds, err
		case !first && len(got) > 0:
			return 0, nil, fds, pidwire.ProtocolError("descriptors on a later chunk")
		case !first && typ != pidwire.MsgSpawn:
			return 0, nil, fds, pidwire.ProtocolError("a chunk of type " + strconv.Itoa(int(typ)) + " in a request")
		case len(all)+len(payload) > pidwire.MaxRequest:
			return 0, nil, fds, pidwire.ProtocolError("a request over " + strconv.Itoa(pidwire.MaxRequest) + " bytes")
		}
		if first && flags&pidwire.FlagMore == 0 {
			return typ, payload, fds, nil
		}
		all = append(all, payload...)
		if flags&pidwire.FlagMore == 0 {
			return typ, all, fds, nil
		}
	}
}

// spawn starts one task and answers: its pid, start time and pidfd, or why it failed. The answer is
// sent before the task is registered with the child reaper, whose lock is held across the fork, so the
// task's exit can be reported only after it; a goroutine reports that.
func (in *initProc) spawn(r pidwire.Spawn) {
	pidfd := -1
	sys := &syscall.SysProcAttr{
		Setpgid: r.Setpgid, Setsid: r.Setsid, Setctty: r.Setctty, Foreground: r.Fg, Ctty: r.Ctty,
		Credential: r.Cred, PidFD: &pidfd,
	}
	if r.Fg {
		// For Foreground, Go wants the terminal as a descriptor of the parent: the init's copy.
		sys.Ctty = r.Files[r.Ctty]
	}
	if r.Cgroup >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, r.Cgroup
	}
	files := make([]uintptr, len(r.Files))
	for i, fd := range r.Files {
		files[i] = uintptr(fd)
	}
	attr := &syscall.ProcAttr{Dir: r.Dir, Env: r.Env, Files: files, Sys: sys}
	_, exited, err := in.kids.Start(func() (int, error) {
		pid, err := in.forkExec(r.Argv, attr, r.Cred != nil)
		if err != nil {
			return 0, err
		}
		var e pidwire.Encoder
		host, start := in.identify(pid, pidfd)
		e.U64(r.ID)
		e.U64(uint64(host))
		e.U64(uint64(pid))
		e.U64(start)
		in.reply(pidwire.MsgSpawned, e.Bytes(), pidfd)
		syscall.Close(pidfd)
		return pid, nil
	})
	if err != nil {
		var e pidwire.Encoder
		e.U64(r.ID)
		var errno syscall.Errno
		errors.As(err, &errno)
		e.U32(uint32(errno))
		msg := "start " + r.Argv[0] + ": " + err.Error()
		e.Str(msg[:min(len(msg), pidwire.MaxErrorMsg)])
		in.reply(pidwire.MsgFailed, e.Bytes(), -1)
		return
	}
	go func() {
		st := <-exited
		// With spawnMu held no task starts between the look at the children and the message: the
		// last exit the server reads says whether the namespace is empty (see pidns.Init.Empty).
		in.spawnMu.Lock()
		defer in.spawnMu.Unlock()
		var flags uint32
		if !reap.HasChildren() {
			flags |= pidwire.ExitEmpty
		}
		var e pidwire.Encoder
		e.U64(r.ID)
		e.U32(uint32(st.Status))
		e.U32(flags)
		in.reply(pidwire.MsgExit, e.Bytes(), -1)
	}()
}

// signal sends each of sigs in turn to every process of the namespace but the init (kill(2) with pid
// -1, from pid 1: the kernel reaches the namespace's processes, and those of namespaces below it, and
// no other), then answers: 0, or the first failure other than ESRCH (no process left to signal).
func (in *initProc) signal(id uint64, sigs []syscall.Signal) {
	var errno syscall.Errno
	for _, sig := range sigs {
		err := syscall.Kill(-1, sig)
		if e, ok := err.(syscall.Errno); ok && e != syscall.ESRCH && errno == 0 {
			errno = e
		}
	}
	var e pidwire.Encoder
	e.U64(id)
	e.U32(uint32(errno))
	in.reply(pidwire.MsgSignaled, e.Bytes(), -1)
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
	in.conn.Send(typ, 0, payload, fds)
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
		if err := prctl(prCapAmbient, prCapAmbientClearAll, 0); err != nil {
			return &os.SyscallError{Syscall: "prctl: clear the ambient capabilities of the forking thread", Err: err}
		}
	}
	if nnp {
		if err := prctl(prSetNoNewPrivs, 1, 0); err != nil {
			return &os.SyscallError{Syscall: "prctl: set no_new_privs for tasks that run as another user", Err: err}
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
		var buf [512]byte
		if b, ok := procstat.ReadAt(in.hostProc, "self/fdinfo/"+strconv.Itoa(pidfd), buf[:]); ok {
			host = procstat.FdinfoPid(b)
		}
		if host > 0 {
			if st, ok := procstat.Read(in.hostProc, strconv.Itoa(host)+"/stat", host); ok {
				return host, st.Start
			}
		}
	}
	if !in.procOK {
		return host, 0 // /proc is the host's: nspid names another process there
	}
	st, _ := procstat.Read(-1, "/proc/"+strconv.Itoa(nspid)+"/stat", nspid)
	return host, st.Start
}

// prctl is prctl(2) with two arguments, which package syscall does not wrap.
func prctl(option, arg2, arg3 uintptr) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, option, arg2, arg3); e != 0 {
		return e
	}
	return nil
}

// Options of prctl(2) that package syscall does not name.
const (
	prSetNoNewPrivs      = 38 // PR_SET_NO_NEW_PRIVS
	prCapAmbient         = 47 // PR_CAP_AMBIENT
	prCapAmbientClearAll = 4  // PR_CAP_AMBIENT_CLEAR_ALL
)

// oPath is O_PATH, which package syscall does not name: the same value on every architecture Go
// supports on Linux.
const oPath = 0x200000
