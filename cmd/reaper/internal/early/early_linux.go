package early

import (
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"syscall"

	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/reap"
)

// ShutdownSignals end reaper in order: every session is torn down (SIGTERM, grace, kill), then reaper
// exits; a second one cuts the grace periods short. The faults among them count only when sent by
// kill(2): a real fault still crashes the program, and the guard cleans up after it.
var ShutdownSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGPWR, syscall.SIGXCPU,
	syscall.SIGABRT, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGSEGV, syscall.SIGSYS, syscall.SIGTRAP,
}

// IgnoredSignals would end reaper by their default action, and mean nothing to it. SIGPIPE above all:
// a write to a closed stdout or stderr then fails with EPIPE instead of killing the program (a closed
// stdout over stdio ends the session as a closed connection does); and SIGSTKFLT, which Go's runtime
// takes for a crash. Handled, not ignored: a handled signal is reset to its default in the programs
// reaper starts, so tasks see SIGPIPE as usual.
//
// USR1, USR2, ALRM, VTALRM, IO and XFSZ mean nothing to reaper either, and are not asked for: Go's
// runtime catches and drops them unless a program asks for them, and each signal asked for costs a
// round trip to the runtime's signal-mask thread, at every start of guard and server alike.
var IgnoredSignals = []os.Signal{syscall.SIGPIPE, syscall.SIGSTKFLT}

// RunSignals are the signals beyond ShutdownSignals that reaper run's guard forwards to its server,
// which passes them on to the job (job.ForwardedSignals).
var RunSignals = []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// guarded is what the initialisation did as a guard whose server did not end cleanly: written
// there, before main runs, and only read after (by Ended).
var guarded struct {
	ended     guard.Ended
	err       error
	forwarded error // the first signal that could not be forwarded
	ok        bool
}

// init, for reaper serve and reaper run, marks the inherited descriptors close-on-exec. Run as a
// guard (without the environment of a guarded server), it starts the server as this program again,
// with the same command line, before it checks that command line (the server checks it, says what is
// wrong and exits with its usage status), and forwards every signal that would end it to the server
// until the server has ended. If the server exited after announcing guard.Clean and nothing came to
// this process, its status is this process's: init exits with it. Otherwise main runs, and finds
// what happened in Ended. A signal that comes before init has asked for it ends the guard, as it
// would have a moment earlier; the server then learns of it from guard.Signal.
func init() {
	opts, ok := ServerOptions(os.Args)
	if !ok {
		return
	}
	// Guard and server alike, before either opens a descriptor of its own.
	closeOnExec()
	if os.Getenv(guard.EnvPid) != "" {
		return // the server
	}
	guarded.ok = true
	s, err := guard.Start(opts)
	if err != nil {
		guarded.err = err
		return
	}
	// Until the server has ended the guard only forwards signals and waits: one P is enough, and
	// spares it the idle Ps' spinning threads while it asks for signals (0.1-0.3 ms of CPU a stdio
	// session). The price: in the wait's first 10 ms, until the runtime's monitor takes the P from
	// the goroutine blocked in waitid, a signal may wait as long to be forwarded. Main, which cleans
	// up when the server did not end cleanly, gets the Ps back.
	procs := runtime.GOMAXPROCS(1)
	sigs := make(chan os.Signal, 16)
	asked := slices.Concat(ShutdownSignals, IgnoredSignals)
	if os.Args[1] == "run" {
		asked = append(asked, RunSignals...)
	}
	signal.Notify(sigs, asked...)
	type waited struct {
		e   guard.Ended
		err error
	}
	done := make(chan waited, 1)
	go func() {
		e, err := s.Wait()
		done <- waited{e, err}
	}()
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGPIPE {
				continue // this process's own writes; the server has its own
			}
			if err := s.Signal(sig.(syscall.Signal)); err != nil && guarded.forwarded == nil {
				guarded.forwarded = err
			}
			continue
		case w := <-done:
			guarded.ended, guarded.err = w.e, w.err
		}
		break
	}
	if guarded.err == nil && guarded.forwarded == nil && guarded.ended.Clean() && !reap.HasChildren() {
		os.Exit(guarded.ended.Status.ExitStatus())
	}
	runtime.GOMAXPROCS(procs)
	// The shutdown signals stay asked for: main cleans up, and a signal must not end it halfway.
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

// Ended returns how the server this process started as a guard ended, when init did not exit with
// its status: it crashed, or did not announce guard.Clean, or something came to this process as its
// subreaper. err says why the server could not be started or waited for, and forwarded which signal
// could not be forwarded to it; tried is false if this process did not start one (it is not a guard,
// or it runs a command in process: tests).
func Ended() (e guard.Ended, tried bool, err, forwarded error) {
	return guarded.ended, guarded.ok, guarded.err, guarded.forwarded
}

// closeOnExec marks every descriptor above standard error close-on-exec. reaper may inherit
// descriptors from whatever started it (a CI runner's pipes, a shell's, a supervisor's sockets): no
// task may inherit them in turn, to read what it should not or to hold a pipe open that its owner
// waits on. It runs before anything else opens a descriptor that must be passed on explicitly.
func closeOnExec() {
	if _, _, e := syscall.Syscall(sysCloseRange, 3, ^uintptr(0), closeRangeCloexec); e == 0 {
		return
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
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
