package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/safefs"
	"golang.org/x/sys/unix"
)

// The environment of a guarded server: the guard's pid, and the descriptor on which the server
// announces its record and, at its end, Clean (see LinkFrom). Tasks never inherit REAPER_ variables.
const (
	EnvPid = "REAPER_GUARD_PID"
	EnvFD  = "REAPER_GUARD_FD"
)

// Signal is a guarded server's parent-death signal, told apart from an ordinary SIGTERM by Link.Gone.
const Signal = syscall.SIGTERM

// Clean is the last line a server writes on its announcement descriptor when it has ended every
// session and removed everything its instance made. It is not JSON, so no reader takes it for a
// record.
const Clean = "clean"

// Options configures Run.
type Options struct {
	// Argv is the server's command line: usually this program with its arguments. Argv[0] is shown
	// in listings; the program run is Path. Required.
	Argv []string
	Path string   // the program to run; empty means this program (see Executable)
	Env  []string // the server's environment, to which EnvPid and EnvFD are added; nil means this process's
	// Setsid starts the server in a session of its own, so that a signal to the guard's process
	// group (a terminal's Ctrl-C, a CI runner killing a job's group) reaches it only as the guard
	// forwards it. Setpgid starts it in a process group of its own in the guard's session, for a
	// server whose job needs the session's terminal (reaper run).
	Setsid  bool
	Setpgid bool
	// Signals are forwarded to the server until it has ended. Run also asks for SIGPIPE, which it
	// does not forward: a write of the guard's own to a closed pipe must not end it.
	Signals []os.Signal
	// CloseTimeout bounds each wait for killed processes to disappear; zero means kill.DefaultTimeout.
	CloseTimeout time.Duration
	Logger       *slog.Logger // what the kill policy does; nil discards
}

// Result is how the server ended and what the guard cleaned up after it.
type Result struct {
	Pid    int            // the server's pid (reaped: it may name another process by now)
	Code   int            // the server's exit status, or 128+n if it died of signal n
	Signal syscall.Signal // the signal the server died of, or 0
	// Clean reports that the server exited by itself after announcing Clean, and nothing came to the
	// guard: nothing was cleaned up.
	Clean bool
	// Announced are the lines the server wrote on its announcement descriptor, in order, Clean
	// included.
	Announced []string
	Instance  instance.Record // the last record the server announced (empty if it died before it could)
	Killed    []proc.Proc     // the processes the server left running, which the guard killed
	// Forwarded says why a signal could not be forwarded to the server (the first such failure).
	Forwarded error
	// Err says why the server could not be waited for, or what could not be cleaned up.
	Err error
}

// Run is a guard's life: it makes this process a child subreaper, starts the server as its child,
// forwards Options.Signals to it until it has ended, and then, unless the server ended cleanly and
// left nothing here, kills and removes what the server left. It returns the error that kept the
// server from starting, or how the server ended. It leaves the signals asked for and runs this
// process's wait loop while it cleans up: call it once, where nothing else waits for children.
func Run(opts Options) (Result, error) {
	if len(opts.Argv) == 0 {
		return Result{}, errors.New("guard: no server command line")
	}
	if opts.Path == "" {
		opts.Path = Executable()
	}
	// The kernel sends the parent-death signal when the thread that forked the child exits, not the
	// process: the thread that forks the server stays this goroutine's until the server is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Asked for before the server starts, so that a signal meanwhile is forwarded once it has; and
	// never stopped, so that none ends the guard halfway through its last words, nor SIGPIPE a log
	// line to a closed stderr.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGPIPE}, opts.Signals...)...)
	p, announcements, err := start(opts)
	if err != nil {
		return Result{}, err
	}
	res := Result{Pid: p.Pid}
	type waited struct {
		state *os.ProcessState
		err   error
	}
	done := make(chan waited, 1)
	go func() {
		st, err := p.Wait()
		done <- waited{st, err}
	}()
	var w waited
	for w.state == nil && w.err == nil {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGPIPE {
				continue // this process's own writes; the server has its own
			}
			// os.Process signals by pidfd, or not at all once the server is reaped: never another
			// process that reused its pid.
			if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) && res.Forwarded == nil {
				res.Forwarded = fmt.Errorf("forward %v to the server (pid %d): %w", sig, p.Pid, err)
			}
		case w = <-done:
		}
	}
	res.Announced = readAnnouncements(announcements)
	res.Instance = lastRecord(res.Announced)
	if w.err != nil {
		res.Code, res.Err = 1, fmt.Errorf("wait for the server (pid %d): %w", p.Pid, w.err)
	} else {
		ws := w.state.Sys().(syscall.WaitStatus)
		res.Code = reap.Exit{Pid: p.Pid, Status: ws}.Code()
		if ws.Signaled() {
			res.Signal = ws.Signal()
		}
		res.Clean = ws.Exited() && len(res.Announced) > 0 && res.Announced[len(res.Announced)-1] == Clean && !reap.HasChildren()
	}
	if !res.Clean {
		cleanUp(opts, &res)
	}
	return res, nil
}

// start makes this process a child subreaper and starts the server, with Signal as its parent-death
// signal and the write end of the announcement pipe as its descriptor 3. It returns the server and
// the pipe's read end.
func start(opts Options) (*os.Process, *os.File, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, nil, fmt.Errorf("guard: become a child subreaper: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("guard: announcement pipe: %w", err)
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)], EnvPid+"="+strconv.Itoa(os.Getpid()), EnvFD+"=3")
	p, err := os.StartProcess(opts.Path, opts.Argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{stdFile(os.Stdin), stdFile(os.Stdout), stdFile(os.Stderr), w},
		Sys:   &syscall.SysProcAttr{Pdeathsig: Signal, Setsid: opts.Setsid, Setpgid: opts.Setpgid && !opts.Setsid},
	})
	w.Close()
	if err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("guard: start %s: %w", opts.Argv[0], err)
	}
	return p, r, nil
}

// stdFile returns f if its descriptor is open, and nil ("closed" for the child) otherwise: a guard
// started with a standard descriptor closed must not fail to start its server.
func stdFile(f *os.File) *os.File {
	if _, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil {
		return nil
	}
	return f
}

// readAnnouncements reads the lines the server, having exited, wrote on the pipe r (a few hundred
// bytes, which the pipe held), and closes r. The pipe's write end was the server's alone, so the read
// ends at once; if something holds it all the same, the read gives up after a second. At most 1 MiB
// is kept.
func readAnnouncements(r *os.File) []string {
	defer r.Close()
	r.SetReadDeadline(time.Now().Add(time.Second))
	b, _ := io.ReadAll(io.LimitReader(r, 1<<20))
	return strings.FieldsFunc(string(b), func(c rune) bool { return c == '\n' })
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

// cleanUp is a guard's work once its server has ended without a clean end: it kills the processes
// in the announced slice and every descendant of this process, then removes the slice and the
// instance's state directory, adding to res what it killed and what failed. It runs this process's
// wait loop meanwhile (reap.Claim), which reaps what the kills end among its children.
func cleanUp(opts Options, res *Result) {
	children, err := reap.Claim(func() (*reap.Children, error) { return reap.NewChildren(), nil })
	if err != nil {
		res.Err = errors.Join(res.Err, err)
		return
	}
	defer reap.Release()
	defer children.Close([]string{"/bin/sh", "-c", ":"})
	k := kill.Policy{Log: opts.Logger, Timeout: opts.CloseTimeout}
	errs := []error{res.Err}
	var slice *cgroup.Slice
	if res.Instance.Slice != "" {
		if s, err := cgroup.OpenSlice(res.Instance.Slice); err == nil {
			slice = s
			pids, _ := s.Pids()
			for _, p := range pids {
				res.Killed = append(res.Killed, proc.Describe(p))
			}
		} else if !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
	}
	// cgroup.kill reaches what forks while it runs; the walk below this process reaches what left
	// the slice.
	below, _, err := k.Everything(context.Background(), kill.Everything{Self: os.Getpid(), Slice: slice})
	res.Killed = append(res.Killed, below...)
	if err != nil {
		errs = append(errs, err)
	}
	if slice != nil {
		errs = append(errs, slice.Remove())
	}
	if d := res.Instance.StateDir; d != "" {
		errs = append(errs, removeState(d))
	}
	res.Err = errors.Join(errs...)
}

// lastRecord returns the last record among a server's announcements; Clean and anything else that is
// not a record are passed over.
func lastRecord(lines []string) instance.Record {
	var last instance.Record
	for _, l := range lines {
		var in instance.Record
		if err := json.Unmarshal([]byte(l), &in); err == nil {
			last = in
		}
	}
	return last
}

// removeState removes an instance's state directory at path: relative to the directory it is in,
// which must be this user's alone as a Reaper's is (see instance.OpenStateDir), and only a name that
// is an instance's.
func removeState(path string) error {
	if _, ok := instance.FromDirName(filepath.Base(path)); !ok {
		return fmt.Errorf("remove state directory %s: not an instance's", path)
	}
	base, err := safefs.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer base.Close()
	return base.RemoveAll(filepath.Base(path))
}
