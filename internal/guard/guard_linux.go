package guard

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// The environment of a guarded server: the guard's pid, and the descriptor on which the server
// announces its record (reaper's Options.Announce). The server's caller reads them (see
// instance.GuardedBy); they start with REAPER_, so tasks never inherit them.
const (
	EnvPid = "REAPER_GUARD_PID"
	EnvFD  = "REAPER_GUARD_FD"
)

// Signal is the signal a guarded server receives when its guard dies (its parent-death signal).
const Signal = syscall.SIGTERM

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

// A Server is a guard's server, started by Start.
type Server struct {
	// Pid is the server's pid.
	Pid int
	// Exited receives the server's exit status, once.
	Exited <-chan reap.Exit
	// Children is the guard's wait4 loop, which reaps the server and whatever comes to the guard
	// as the subreaper.
	Children *reap.Children
	// Announcements is the read end of the pipe on which the server announces its record.
	Announcements *os.File

	// mu guards the field that follows.
	mu    sync.Mutex
	pidfd int // the server's, until Release; -1 after, or where the kernel has no pidfds
}

// Start makes this process a child subreaper and starts the server as its child, with Signal as its
// parent-death signal, and its wait4 loop. The kernel sends a parent-death signal when the thread
// that forked the child exits, not the process, so Start locks the calling goroutine to its thread
// for good: call it from the main goroutine (or a package's initialisation, which runs there). The
// caller must hold the process's child table (reap.Claim) until the wait4 loop has ended
// (Children.Close, then reap.Release).
func Start(opts Options) (*Server, error) {
	if len(opts.Argv) == 0 {
		return nil, errors.New("guard: no server command line")
	}
	runtime.LockOSThread() // never unlocked: the server's parent-death signal follows this thread
	if opts.Path == "" {
		opts.Path = proc.Executable()
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("guard: become child subreaper: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)], EnvPid+"="+strconv.Itoa(os.Getpid()), EnvFD+"=3")
	s := &Server{Announcements: pr, pidfd: -1}
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{stdFD(0), stdFD(1), stdFD(2), pw.Fd()},
		Sys:   &syscall.SysProcAttr{Pdeathsig: Signal, Setsid: opts.Setsid, Setpgid: opts.Setpgid && !opts.Setsid, PidFD: &s.pidfd},
	}
	s.Children = reap.NewChildren()
	s.Pid, s.Exited, err = s.Children.Start(func() (int, error) { return syscall.ForkExec(opts.Path, opts.Argv, attr) })
	pw.Close()
	if err != nil {
		pr.Close()
		s.Children.Close(nil)
		return nil, fmt.Errorf("guard: start %s: %w", opts.Argv[0], err)
	}
	return s, nil
}

// stdFD returns fd if it is open, and "closed" for the child otherwise (a guard started with a
// standard descriptor closed must not fail to start its server).
func stdFD(fd int) uintptr {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return ^uintptr(0)
	}
	return uintptr(fd)
}

// Signal forwards sig to the server. Once the server's pidfd is released it does nothing: the signal
// goes through a pidfd, never to a pid that may have been reused. (Without pidfds, it does nothing.)
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pidfd < 0 {
		return nil
	}
	if err := unix.PidfdSendSignal(s.pidfd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("guard: forward %v to pid %d: %w", sig, s.Pid, err)
	}
	return nil
}

// Release closes the server's pidfd, once the server has exited: Signal does nothing after.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pidfd >= 0 {
		unix.Close(s.pidfd)
		s.pidfd = -1
	}
}
