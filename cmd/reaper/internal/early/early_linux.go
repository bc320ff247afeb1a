package early

import (
	"os"
	"strconv"

	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// started is what the initialisation did as a guard: written there, before main runs, and only read
// after (by Server).
var started struct {
	server *guard.Server
	err    error
	ok     bool
}

// init never returns in the init of a PID namespace. For reaper serve and reaper run it marks the
// inherited descriptors close-on-exec. Run as a guard (without the environment of a guarded
// server), it starts the server as this program again, with the same command line, before it checks
// that command line: the server checks it, says what is wrong and exits with its usage status, which
// the guard then exits with.
func init() {
	if pidns.IsInit(os.Args) {
		os.Exit(pidns.Main())
	}
	opts, ok := ServerOptions(os.Args)
	if !ok {
		return
	}
	// Guard and server alike, before either opens a descriptor of its own.
	closeOnExec()
	if os.Getenv(guard.EnvPid) != "" {
		return // the server
	}
	started.server, started.err = reap.Claim(func() (*guard.Server, error) { return guard.Start(opts) })
	started.ok = true
}

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

// Server returns the server this process started as a guard, or why it could not; tried is false if
// it did not try (it is not a guard, or it runs a command in-process: tests).
func Server() (s *guard.Server, tried bool, err error) {
	return started.server, started.ok, started.err
}

// closeOnExec marks every descriptor above standard error close-on-exec. reaper may inherit
// descriptors from whatever started it (a CI runner's pipes, a shell's, a supervisor's sockets): no
// task may inherit them in turn, to read what it should not or to hold a pipe open that its owner
// waits on. It runs before anything else opens a descriptor that must be passed on explicitly.
func closeOnExec() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
