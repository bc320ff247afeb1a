package fork

import (
	"slices"
	"strconv"
	"syscall"

	"github.com/cgreaper/reaper/internal/guard"
)

// started is what init did: written there, before any package that imports this one initialises,
// and only read after.
var started struct {
	server *guard.Server
	err    error
}

// init, in every reaper process, marks the inherited descriptors close-on-exec. For reaper serve and
// reaper run as a user starts them (a guard: without the environment of a guarded server), it then
// starts the server as this program again, with the same command line, before that command line is
// checked (the server checks it, says what is wrong and exits with its usage status).
func init() {
	// Guard and server alike, before either opens a descriptor of its own.
	closeOnExec()
	if v, _ := syscall.Getenv(guard.EnvPid); v != "" {
		return // a guard's server
	}
	argv, err := cmdline()
	if err != nil {
		started.err = err // reported by Server, to a guard; others need no command line here
		return
	}
	if opts, ok := ServerOptions(argv); ok {
		started.server, started.err = guard.Start(opts)
	}
}

// Server returns the server init started, or why it could not be started. Both are nil in a process
// that is no guard (see ServerOptions): a server, a command without a guard.
func Server() (*guard.Server, error) { return started.server, started.err }

// ServerOptions returns how the guard of the command line argv (os.Args) starts its server, and
// false if its command runs under no guard. reaper serve's server gets a session of its own;
// reaper run's a process group of its own in the guard's session, as its job may need the session's
// terminal.
func ServerOptions(argv []string) (guard.Options, bool) {
	if len(argv) < 2 {
		return guard.Options{}, false
	}
	switch argv[1] {
	case "serve":
		return guard.Options{Argv: argv, Setsid: true}, true
	case "run":
		return guard.Options{Argv: argv, Setpgid: true}, true
	}
	return guard.Options{}, false
}

// maxCmdline bounds what cmdline reads. The kernel bounds a program's arguments and environment
// together by a quarter of the stack's limit (6 MiB at the usual 8 MiB, more when it is raised): a
// command line longer than this is refused, not cut.
const maxCmdline = 16 << 20

// cmdline returns this process's arguments as the kernel shows them in /proc/self/cmdline: each
// followed by a NUL byte, which no argument can hold.
func cmdline() ([]string, error) {
	const path = "/proc/self/cmdline"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &guard.Error{Op: "read " + path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxCmdline {
				return nil, &guard.Error{Op: "read " + path, Err: syscall.E2BIG}
			}
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &guard.Error{Op: "read " + path, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return splitNUL(buf), nil
}

// splitNUL returns the NUL-terminated strings in b; bytes after the last NUL, which the kernel never
// leaves, are an argument of their own.
func splitNUL(b []byte) []string {
	var args []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		args = append(args, string(b[:i]))
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return args
}

// closeOnExec marks every descriptor above standard error close-on-exec. reaper may inherit
// descriptors from whatever started it (a CI runner's pipes, a shell's, a supervisor's sockets): no
// task may inherit them in turn, to read what it should not or to hold a pipe open that its owner
// waits on, and a guard's server does not inherit them from the guard. It runs before anything else
// opens a descriptor that must be passed on explicitly.
func closeOnExec() {
	if _, _, e := syscall.RawSyscall(sysCloseRange, 3, ^uintptr(0), closeRangeCloexec); e == 0 {
		return
	}
	// Before Linux 5.11: one by one, as /proc/self/fd lists them.
	dir, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(dir)
	var names []string
	buf := make([]byte, 4096)
	for {
		n, err := syscall.ReadDirent(dir, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
	for _, name := range names {
		if fd, err := strconv.Atoi(name); err == nil && fd > 2 && fd != dir {
			syscall.CloseOnExec(fd)
		}
	}
}

// close_range(2), which package syscall does not name: the number is the same on every
// architecture (system calls added since Linux 5.1 share their numbers).
const (
	sysCloseRange     = 436
	closeRangeCloexec = 1 << 2
)
