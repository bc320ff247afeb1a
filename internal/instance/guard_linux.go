package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/safefs"
	"golang.org/x/sys/unix"
)

// The environment of a guarded server (see internal/guard).
const (
	EnvGuardPid = guard.EnvPid
	EnvGuardFD  = guard.EnvFD
)

// GuardSignal is the signal a guarded server receives when its guard dies (its parent-death
// signal). The server tells it apart from an ordinary SIGTERM because its parent is no longer the
// guard (see GuardLink.Gone).
const GuardSignal = guard.Signal

// CleanUpOptions configures CleanUp.
type CleanUpOptions struct {
	// CloseTimeout bounds each wait for killed processes to disappear; zero means
	// kill.DefaultTimeout.
	CloseTimeout time.Duration
	// Logger receives what the kill policy does. Nil discards.
	Logger *slog.Logger
}

// GuardResult is how the server ended and what the guard cleaned up after it.
type GuardResult struct {
	// Code is the server's exit status, or 128+n if it died of signal n.
	Code int
	// Signal is the signal the server died of, or 0.
	Signal syscall.Signal
	// Instance is what the server announced (empty if it died before it could).
	Instance Record
	// Killed are the processes the server left running, which the guard killed.
	Killed []proc.Proc
	// Err says what could not be cleaned up.
	Err error
}

// CleanUp is a guard's work once its server has ended without a clean end (see guard.Ended.Clean):
// by any cause, an orderly exit, SIGKILL, an OOM kill, a crash. The pid that clients, orchestrators
// and terminals know is the guard's (see cmd/reaper/internal/early); because the guard is the
// server's parent and a child subreaper, everything the server started comes to the guard when the
// server dies, whatever it did to its cgroup, its environment or its parent chain. CleanUp kills the
// processes in the instance's slice, which the server announced, and every descendant of this
// process; then it removes the slice and the instance's state directory. It returns how the server
// ended and what was cleaned up. It runs this process's wait loop meanwhile (reap.Claim): call it
// once, where nothing else waits for children.
//
// The guard holds no session, runs no command and speaks no protocol. It learns what the server
// holds from the Record the server announces on a pipe only the two of them have, so no task can
// forge a message to it. If the guard dies first, the server receives GuardSignal and tears
// everything down at once. Killing both at the same moment (a node killing a whole group) leaves the
// cleanup to the next instance's Sweep, or to `reaper sweep`.
func CleanUp(opts CleanUpOptions, e guard.Ended) GuardResult {
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = kill.DefaultTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res := GuardResult{Code: reap.Exit{Pid: e.Pid, Status: e.Status}.Code(), Instance: announced(e.Announced)}
	if e.Status.Signaled() {
		res.Signal = e.Status.Signal()
	}
	// The wait loop reaps what the kills below end among this process's children.
	children, err := reap.Claim(func() (*reap.Children, error) { return reap.NewChildren(), nil })
	if err != nil {
		res.Err = err
		return res
	}
	defer reap.Release()
	defer children.Close([]string{"/bin/sh", "-c", ":"})
	k := kill.Policy{Log: log, Timeout: opts.CloseTimeout}
	var errs []error
	var slice *cgroup.Slice
	if res.Instance.Slice != "" {
		if s, err := cgroup.OpenSlice(res.Instance.Slice); err == nil {
			slice = s
			pids, _ := s.Pids()
			for _, p := range pids {
				res.Killed = append(res.Killed, proc.Describe(p))
			}
			// cgroup.kill reaches what forks while it runs; the walk below reaches what left the
			// slice.
			if _, err := k.Slice(context.Background(), s, time.Now().Add(opts.CloseTimeout)); err != nil {
				errs = append(errs, err)
			}
		} else if !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
	}
	res.Killed = append(res.Killed, k.Descendants(context.Background(), os.Getpid())...)
	if slice != nil {
		errs = append(errs, slice.Remove())
	}
	if d := res.Instance.StateDir; d != "" {
		errs = append(errs, removeState(d))
	}
	res.Err = errors.Join(errs...)
	return res
}

// announced returns the last Record among a server's announcements; guard.Clean and anything else
// that is not a record are passed over.
func announced(lines []string) Record {
	var last Record
	for _, l := range lines {
		var in Record
		if err := json.Unmarshal([]byte(l), &in); err == nil {
			last = in
		}
	}
	return last
}

// removeState removes an instance's state directory at path, as its guard does after it: relative to
// the directory it is in, which must be this user's alone as a Reaper's is (see OpenStateDir), and
// only a name that is an instance's.
func removeState(path string) error {
	name, ok := strings.CutPrefix(filepath.Base(path), instancePrefix)
	if _, _, valid := parseName(name); !ok || !valid {
		return fmt.Errorf("remove state directory %s: not an instance's", path)
	}
	base, err := safefs.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer base.Close()
	return base.RemoveAll(filepath.Base(path))
}

// GuardLink is what a guarded server knows of its guard.
type GuardLink struct {
	// Pid is the guard's pid; zero when the server is not guarded.
	Pid int
	// Announce is where the server announces its Record (reaper's Options.Announce).
	Announce *os.File
	// start is the guard's start time, which tells it apart from a process that reused its pid.
	start uint64
	// guard is the guard, pinned by a pidfd (where the kernel has them) for WaitGone.
	guard proc.Handle
}

// GuardedBy reads a server's link to its guard from the values of EnvGuardPid and EnvGuardFD (the
// caller reads the environment). It makes the announcement descriptor close-on-exec, so that no task
// inherits it, and fails if the guard is already gone (it died before the server could take its
// parent-death signal). Empty values mean the server is not guarded.
func GuardedBy(pid, fd string) (GuardLink, error) {
	if pid == "" {
		return GuardLink{}, nil
	}
	p, err1 := strconv.Atoi(pid)
	f, err2 := strconv.Atoi(fd)
	if err1 != nil || err2 != nil || p <= 0 || f < 3 {
		return GuardLink{}, fmt.Errorf("bad guard link %s=%q %s=%q", EnvGuardPid, pid, EnvGuardFD, fd)
	}
	unix.CloseOnExec(f)
	l := GuardLink{Pid: p, Announce: os.NewFile(uintptr(f), "guard")}
	w := proc.NewWalker()
	if st, ok := w.Stat(p); ok {
		l.start = st.Start
		if hs := w.Verify([]proc.Stat{st}); len(hs) == 1 {
			l.guard = hs[0]
		}
	}
	if l.Gone() {
		l.Announce.Close()
		return GuardLink{}, fmt.Errorf("the guard (pid %d) is gone", p)
	}
	return l, nil
}

// Clean tells the guard, as the server's last word, that the server has ended every session and
// removed everything its instance made: the guard then exits with the server's status at once,
// without cleaning up. A server that is not guarded does nothing.
func (l GuardLink) Clean() error {
	if l.Announce == nil {
		return nil
	}
	if _, err := l.Announce.Write([]byte(guard.Clean + "\n")); err != nil {
		return fmt.Errorf("tell the guard (pid %d) of a clean end: %w", l.Pid, err)
	}
	return nil
}

// WaitGone blocks until the guard has died or ctx is done, and reports whether the guard died. It
// sleeps in poll(2) on a pidfd of the guard, which becomes readable once the whole guard process has
// exited: this, not the parent-death signal, is how a server knows for sure. (The kernel sends the
// parent-death signal when the guard's thread that forked the server exits, while other guard threads
// may live on a moment and become the server's parent; two such signals may also merge into one.)
// Where pidfds are unavailable it looks every 10 ms. A server that is not guarded waits for ctx.
func (l GuardLink) WaitGone(ctx context.Context) bool {
	if l.Pid == 0 {
		<-ctx.Done()
		return false
	}
	w := proc.NewWalker()
	h := l.guard
	if !h.HasFD() {
		// Without a pidfd WaitGone looks in /proc: the guard's pid with its start time.
		h = proc.NewHandle(proc.Stat{Pid: l.Pid, Start: l.start}, -1)
	}
	for ctx.Err() == nil {
		if alive := w.WaitGone(ctx, []proc.Handle{h}, time.Now().Add(time.Hour)); len(alive) == 0 {
			return true
		}
	}
	return false
}

// Gone reports whether a guarded server's guard has died or is dying, as far as can be seen now:
// this process's parent is no longer the guard, or the guard is exiting (see WaitGone for the sure
// way).
func (l GuardLink) Gone() bool {
	if l.Pid == 0 {
		return false
	}
	if os.Getppid() != l.Pid {
		return true
	}
	st, ok := proc.NewWalker().Stat(l.Pid)
	return !ok || st.Start != l.start || st.Dead()
}
