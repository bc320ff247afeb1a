package pidns

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// initSignals are the signals whose default in a Go program ends it (HUP, INT, TERM; QUIT, ABRT and
// the faults, which crash it when sent by kill(2)). Neither a task (the kernel delivers a signal sent
// from inside the namespace to its init only when the init handles it, as Go does every signal) nor a
// signal to the server's process group may end the init: asked for, they do nothing. Every other
// signal Go already does nothing with, or leaves at its default, which the kernel ignores for a
// namespace's init; asking for those too would cost a round trip each to the runtime's signal-mask
// thread. Handled, not ignored: a handled signal is reset to its default in a child, an ignored one
// would stay ignored in every task. SIGKILL from outside the namespace still ends it.
var initSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGABRT,
	syscall.SIGSTKFLT, syscall.SIGSYS, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGSEGV,
}

// RunInit is the init (see the package documentation): the program's main calls it, first thing,
// when IsInit says it was started as one. It returns the process's exit status: 0 when the server
// has gone, 2 when the program was not started as an init.
func RunInit() int {
	// Pid 1: the mounts below are made in a mount namespace of the init's own, never the host's.
	typ, err := unix.GetsockoptInt(initFD, unix.SOL_SOCKET, unix.SO_TYPE)
	if os.Getpid() != 1 || err != nil || typ != unix.SOCK_SEQPACKET {
		fmt.Fprintf(os.Stderr, "reaper: %s is the init of a session's PID namespace; reaper starts it itself\n", InitArg)
		return 2
	}
	unix.CloseOnExec(initFD)
	// Not dumpable: a task running as the init's user cannot ptrace it or read its memory.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Handled, never read: the kernel then drops these signals when a task sends them (see
	// initSignals). Notify returns once the handlers are in place, before any task starts.
	signal.Notify(make(chan os.Signal, 1), initSignals...)
	c, err := newSock(initFD, "pidns")
	if err != nil {
		fmt.Fprintf(os.Stderr, "reaper: the init of a PID namespace: %v\n", err)
		return 1
	}
	in := &initProc{conn: c, userNS: len(os.Args) > 2 && os.Args[2] == modeUserNS, hostProc: -1, kids: reap.NewChildren()}
	hello, devpts := in.setUp(os.Args[min(len(os.Args), 3):])
	err = in.reply(msgHello, hello, devpts)
	if devpts >= 0 {
		unix.Close(devpts)
	}
	if err != nil {
		return 0 // the server is gone already
	}
	if err := in.serve(); !errors.Is(err, io.EOF) { // serve returns only with an error: EOF when the server went
		fmt.Fprintf(os.Stderr, "reaper: the init of a PID namespace stops: %v\n", err)
		return 1
	}
	return 0 // the kernel kills what is left in the namespace
}

// initProc is the init's state.
type initProc struct {
	conn     *sock
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

// setUp keeps a handle of the server's /proc, stops mounts from propagating back to the host, mounts
// a /proc of the namespace and what seals the session (see mounts_linux.go; args are the init's
// options). It returns the hello message's payload, which says what worked and why not, and an
// O_PATH descriptor of the devpts instance's root for the hello to carry (-1 without one).
func (in *initProc) setUp(args []string) (hello []byte, devpts int) {
	var flags uint32
	var notes []string
	defer func() { hello = new(encoder).U32(flags).Str(strings.Join(notes, "; ")).b }()
	fd, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		in.hostProc = fd
	}
	// MS_SLAVE rather than MS_PRIVATE: tasks still see what the host mounts later.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		notes = append(notes, "making the mounts slaves: "+err.Error())
		return nil, -1
	}
	// mounted records a mount's flag, or why it failed.
	mounted := func(flag uint32, err error) bool {
		if err != nil {
			notes = append(notes, err.Error())
			return false
		}
		flags |= flag
		return true
	}
	err = unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if err != nil {
		err = fmt.Errorf("mounting /proc: %w", err)
	}
	in.procOK = mounted(helloProc, err)
	devpts, err = in.mountDevpts()
	mounted(helloDevpts, err)
	if slices.Contains(args, argIPC) {
		mounted(0, mountMqueue())
	}
	if slices.Contains(args, argPrivateTmp) {
		mounted(helloTmp, mountTmp())
	}
	return nil, devpts
}

// serve reads requests until the server goes.
func (in *initProc) serve() error {
	buf := make([]byte, maxChunk+2)
	for {
		typ, payload, fds, err := in.readRequest(buf)
		switch {
		case err != nil:
		case typ == msgSignal:
			var id uint64
			var sigs []syscall.Signal
			if id, sigs, err = decodeSignal(payload); err == nil && len(fds) > 0 {
				err = protocolErr("descriptors with a signal request")
			} else if err == nil {
				in.signal(id, sigs)
			}
		case typ == msgSpawn:
			var req spawnMsg
			if req, err = decodeSpawn(payload, fds); err == nil {
				in.spawnMu.Lock()
				in.spawn(req)
				in.spawnMu.Unlock()
			}
		default:
			err = protocolErr("message type %d from the server", typ)
		}
		closeAll(fds)
		if err != nil {
			return err
		}
	}
}

// readRequest reads one request, joining its chunks, up to maxRequest bytes.
func (in *initProc) readRequest(buf []byte) (byte, []byte, []int, error) {
	var all []byte
	var fds []int
	for first := true; ; first = false {
		typ, flags, payload, got, err := in.conn.Recv(buf, maxFDs)
		fds = append(fds, got...)
		switch {
		case err != nil:
			return 0, nil, fds, err
		case !first && len(got) > 0:
			return 0, nil, fds, protocolErr("descriptors on a later chunk")
		case !first && typ != msgSpawn:
			return 0, nil, fds, protocolErr("a chunk of type %d in a request", typ)
		case len(all)+len(payload) > maxRequest:
			return 0, nil, fds, protocolErr("a request over %d bytes", maxRequest)
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
func (in *initProc) spawn(r spawnMsg) {
	pidfd := -1
	r.Attr.Sys.PidFD = &pidfd
	_, exited, err := in.kids.Start(func() (int, error) {
		pid, err := in.forkExec(r.Argv, &r.Attr, r.Attr.Sys.Credential != nil)
		if err != nil {
			return 0, err
		}
		host, start := in.identify(pid, pidfd)
		in.reply(msgSpawned, new(encoder).U64(r.ID).U64(uint64(host)).U64(uint64(pid)).U64(start).b, pidfd)
		syscall.Close(pidfd)
		return pid, nil
	})
	if err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		msg := "start " + r.Argv[0] + ": " + err.Error()
		in.reply(msgFailed, new(encoder).U64(r.ID).U32(uint32(errno)).Str(msg[:min(len(msg), maxErrorMsg)]).b, -1)
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
			flags |= exitEmpty
		}
		in.reply(msgExit, new(encoder).U64(r.ID).U32(uint32(st.Status)).U32(flags).b, -1)
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
	in.reply(msgSignaled, new(encoder).U64(id).U32(uint32(errno)).b, -1)
}

// reply sends a message to the server, with a descriptor if fd >= 0. A failure means the server is
// gone, which the next read sees.
func (in *initProc) reply(typ byte, payload []byte, fd int) error {
	var fds []int
	if fd >= 0 {
		fds = []int{fd}
	}
	in.sendMu.Lock()
	defer in.sendMu.Unlock()
	return in.conn.Send(typ, 0, payload, fds)
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
		*f, err = reap.StartForker(func() error {
			if in.userNS {
				if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
					return &os.SyscallError{Syscall: "prctl: clear the ambient capabilities of the forking thread", Err: err}
				}
			}
			if nnp {
				if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
					return &os.SyscallError{Syscall: "prctl: set no_new_privs for tasks that run as another user", Err: err}
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	(*f).Run(func() { pid, err = syscall.ForkExec(argv[0], argv, attr) })
	return pid, err
}

// identify returns the task's pid as the server sees it and its start time, read through the server's
// /proc while the task cannot be reaped (the caller holds the child reaper's lock): the pidfd's
// fdinfo names the pid in the namespace of the /proc it is read through. Zero values where that
// /proc is not at hand; then the start time comes from the namespace's own /proc, if it was mounted.
func (in *initProc) identify(nspid, pidfd int) (host int, start uint64) {
	if in.hostProc >= 0 {
		if host = pidOfFD(in.hostProc, pidfd); host > 0 {
			if st, ok := proc.ReadStat(in.hostProc, strconv.Itoa(host)+"/stat", host); ok {
				return host, st.Start
			}
		}
	}
	if !in.procOK {
		return host, 0 // /proc is the host's: nspid names another process there
	}
	st, _ := proc.ReadStat(-1, "/proc/"+strconv.Itoa(nspid)+"/stat", nspid)
	return host, st.Start
}
