package guard

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/cgreaper/reaper/internal/reap"
)

// The environment of a guarded server: the guard's pid, and the descriptor on which the server
// announces its record (reaper's Options.Announce) and, at its end, Clean. The server's caller reads
// them (see instance.GuardedBy); they start with REAPER_, so tasks never inherit them.
const (
	EnvPid = "REAPER_GUARD_PID"
	EnvFD  = "REAPER_GUARD_FD"
)

// Signal is the signal a guarded server receives when its guard dies (its parent-death signal).
const Signal = syscall.SIGTERM

// Clean is the last line a server writes on its announcement descriptor when it has ended every
// session and removed everything its instance made: its guard then has nothing to clean up. It is
// not JSON, so no reader takes it for a record.
const Clean = "clean"

// Options configures Start.
type Options struct {
	// Argv is the server's command line: usually this program with its arguments. Argv[0] is shown
	// in listings; the program run is Path.
	Argv []string
	// Path is the program to run; empty means this program (or /proc/self/exe, where the binary was
	// replaced on disk since it started).
	Path string
	// Env is the server's environment, to which EnvPid and EnvFD are added. Nil means this
	// process's.
	Env []string
	// Setsid starts the server in a session of its own, so that a signal to the guard's process
	// group (a terminal's Ctrl-C, a CI runner killing a job's group) does not reach it: the guard
	// forwards what it receives, and if the guard is killed the server learns it from Signal.
	Setsid bool
	// Setpgid starts the server in a process group of its own but in the guard's session, for a
	// server whose job needs the session's terminal (reaper run): a signal to the guard's group
	// spares it all the same.
	Setpgid bool
}

// A Server is a guard's server, started by Start. Until Wait has returned, the server is this
// process's child and not yet reaped, so its pid is its own: Signal may use it.
type Server struct {
	// Pid is the server's pid.
	Pid int

	announcements int // the read end of the announcement pipe, non-blocking; Wait closes it

	// mu guards the field that follows.
	mu     sync.Mutex
	reaped bool // Wait has reaped the server: Signal does nothing any more
}

// Start makes this process a child subreaper and starts the server as its child, with Signal as its
// parent-death signal. The kernel sends a parent-death signal when the thread that forked the child
// exits, not the process: call Start from a package's initialisation, which the runtime runs on the
// main thread, and the main thread ends only with the process. (Locking the calling goroutine to its
// thread for good instead would start the runtime's template thread on the guard's way to its
// server.) The caller waits for the server with Wait and must not wait for children otherwise until
// Wait has returned.
func Start(opts Options) (*Server, error) {
	if len(opts.Argv) == 0 {
		return nil, errors.New("guard: no server command line")
	}
	if opts.Path == "" {
		opts.Path = Executable()
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return nil, &Error{Op: "become child subreaper", Err: e}
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, &Error{Op: "pipe", Err: err}
	}
	// The read end is read only once the server has exited (see Wait), and must not block then.
	if err := syscall.SetNonblock(p[0], true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, &Error{Op: "pipe", Err: err}
	}
	env := opts.Env
	if env == nil {
		env = syscall.Environ()
	}
	env = append(env[:len(env):len(env)], EnvPid+"="+strconv.Itoa(syscall.Getpid()), EnvFD+"=3")
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{stdFD(0), stdFD(1), stdFD(2), uintptr(p[1])},
		Sys:   &syscall.SysProcAttr{Pdeathsig: Signal, Setsid: opts.Setsid, Setpgid: opts.Setpgid && !opts.Setsid},
	}
	pid, err := syscall.ForkExec(opts.Path, opts.Argv, attr)
	syscall.Close(p[1])
	if err != nil {
		syscall.Close(p[0])
		return nil, &Error{Op: "start " + opts.Argv[0], Err: err}
	}
	return &Server{Pid: pid, announcements: p[0]}, nil
}

// An Error is what failed, and why. (The package formats without fmt, which would initialise
// before it: see the package documentation.)
type Error struct {
	Op  string // what failed, with the pid or program it concerns
	Err error
}

func (e *Error) Error() string { return "guard: " + e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER, which package syscall does not name.
const prSetChildSubreaper = 36

// stdFD returns fd if it is open, and "closed" for the child otherwise (a guard started with a
// standard descriptor closed must not fail to start its server).
func stdFD(fd int) uintptr {
	if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0); e != 0 {
		return ^uintptr(0)
	}
	return uintptr(fd)
}

// Signal forwards sig to the server, until Wait has reaped it; then it does nothing. Until then the
// pid is the server's, a zombie at worst, and cannot name another process.
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reaped {
		return nil
	}
	if err := syscall.Kill(s.Pid, sig); err != nil && err != syscall.ESRCH {
		return &Error{Op: "forward " + sig.String() + " to pid " + strconv.Itoa(s.Pid), Err: err}
	}
	return nil
}

// An Ended server is what Wait saw of it.
type Ended struct {
	// Pid is the server's pid (reaped: it may name another process by now).
	Pid int
	// Status is how the server ended.
	Status syscall.WaitStatus
	// Announced are the lines the server wrote on its announcement descriptor, in order, Clean
	// included: its record (see instance.Record) and, at a clean end, Clean.
	Announced []string
}

// Clean reports whether the server exited by itself after announcing Clean last: it ended every
// session and removed everything its instance made.
func (e Ended) Clean() bool {
	return e.Status.Exited() && len(e.Announced) > 0 && e.Announced[len(e.Announced)-1] == Clean
}

// Wait waits for the server to exit, reaps it, and returns what it saw. The announcements are read
// once the server has exited, as far as they go then: whatever else may hold the pipe (it should be
// nothing: the server's descriptors are close-on-exec) is not waited for. A server writes a few
// hundred bytes, which the pipe holds without blocking it. Call Wait once.
func (s *Server) Wait() (Ended, error) {
	e := Ended{Pid: s.Pid}
	// Waiting without reaping (WNOWAIT) first keeps the pid the server's while Signal may use it.
	if err := reap.WaitExited(s.Pid); err != nil {
		return e, &Error{Op: "wait for pid " + strconv.Itoa(s.Pid), Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		_, err := syscall.Wait4(s.Pid, &e.Status, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return e, &Error{Op: "reap pid " + strconv.Itoa(s.Pid), Err: err}
		}
		break
	}
	s.reaped = true
	e.Announced = readLines(s.announcements)
	return e, nil
}

// maxAnnounced bounds what Wait keeps of the announcements: a record is a few hundred bytes.
const maxAnnounced = 1 << 20

// readLines reads what the non-blocking fd holds, at most maxAnnounced bytes, closes it, and returns
// its lines.
func readLines(fd int) []string {
	defer syscall.Close(fd)
	var all []byte
	buf := make([]byte, 4096)
	for len(all) < maxAnnounced {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 {
			break // the end, or nothing more for now (EAGAIN)
		}
		all = append(all, buf[:n]...)
	}
	var lines []string
	for len(all) > 0 {
		i := 0
		for i < len(all) && all[i] != '\n' {
			i++
		}
		if i > 0 {
			lines = append(lines, string(all[:i]))
		}
		if i == len(all) {
			break
		}
		all = all[i+1:]
	}
	return lines
}

// Executable returns the path of this program, or /proc/self/exe when that path no longer holds it
// (the binary was replaced on disk by an upgrade): executing /proc/self/exe works even then, but what
// it starts would be listed under the name "exe".
func Executable() string {
	p, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	var a, b syscall.Stat_t
	if syscall.Stat(p, &a) != nil || syscall.Stat("/proc/self/exe", &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		return "/proc/self/exe"
	}
	return p
}
