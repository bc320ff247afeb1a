package cgroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// DefaultKillTimeout bounds the wait for a slice to empty after the hard kill when
// KillOptions.Timeout is zero.
const DefaultKillTimeout = 10 * time.Second

// ErrNotEmpty is returned by [Slice.Kill] when processes remain after the deadline (typically in
// uninterruptible sleep, state D); the report lists them.
var ErrNotEmpty = errors.New("processes remain")

// KillOptions configures [Slice.Kill]. The zero value skips the polite phase and kills at once with the
// best method the kernel offers, waiting up to DefaultKillTimeout for the slice to empty.
type KillOptions struct {
	// Grace is how long processes get to exit after SIGTERM before the hard kill. Zero skips the
	// polite phase.
	Grace time.Duration
	// Timeout bounds the wait for the slice to empty after the hard kill. Zero means
	// DefaultKillTimeout.
	Timeout time.Duration
	// Method forces a kill method; KillAuto uses the one detected for the root.
	Method KillMethod
	// BeforeTerm, if set, is called in the polite phase once the slice's processes have been listed
	// and before they are sent SIGTERM one by one. A caller that knows the slice's process groups can
	// signal them there, one call per group: the kernel then signals a whole group before any of it
	// runs, where signals sent one by one let each woken process preempt the sender and serialise the
	// exits on one CPU.
	BeforeTerm func()
}

// Phase says which phase of [Slice.Kill] ended the slice's processes.
type Phase int

const (
	// PhaseNone means the slice was already empty.
	PhaseNone Phase = iota
	// PhasePolite means every process exited after SIGTERM, within the grace period.
	PhasePolite
	// PhaseKill means the hard kill (cgroup.kill, or SIGKILL) was needed.
	PhaseKill
)

func (p Phase) String() string {
	switch p {
	case PhasePolite:
		return "SIGTERM"
	case PhaseKill:
		return "kill"
	}
	return "none"
}

// Proc describes a process that outlived a kill's deadline.
type Proc struct {
	Pid   int
	State string // as in /proc/<pid>/stat: "D" is uninterruptible sleep, "T" stopped, "Z" zombie
	Comm  string
}

func (p Proc) String() string { return fmt.Sprintf("%d(%s,%s)", p.Pid, p.Comm, p.State) }

// KillReport says what [Slice.Kill] did.
type KillReport struct {
	// Processes is the number of distinct processes seen in the slice.
	Processes int
	// Terminated counts processes that were gone before the hard kill; Killed those listed when it
	// was sent.
	Terminated, Killed int
	// Phase is the phase that emptied the slice.
	Phase Phase
	// Method is the hard kill method used, if the hard kill ran.
	Method KillMethod
	// Duration is the time from the call to the slice being empty (or to the deadline).
	Duration time.Duration
	// Remaining lists the processes still in the slice when the deadline passed.
	Remaining []Proc
}

// Kill ends every process in the slice and its nested leaves, and returns once the slice is empty or
// the deadline has passed. It runs in two phases:
//
//  1. Polite (if Grace > 0): SIGTERM, followed by SIGCONT so that stopped processes can act on it, to
//     every process, re-reading cgroup.procs until no new pid appears; then up to Grace for the
//     slice to empty. Cancelling ctx cuts this phase short.
//  2. Hard: cgroup.kill, which also catches children forked while it runs; where the kernel lacks it,
//     freeze, SIGKILL every process, thaw; lacking the freezer too, SIGKILL sweeps. Then a wait
//     for cgroup.events to read "populated 0", bounded by Timeout (ctx does not shorten it).
//
// Every signal goes through a pidfd opened before the pid's membership is re-checked, so a pid reused
// by an unrelated process is never signalled. Kill never waits for (reaps) processes.
//
// If processes remain at the deadline the report lists them with their state, and the error wraps
// ErrNotEmpty.
func (s *Slice) Kill(ctx context.Context, opts KillOptions) (rep KillReport, err error) {
	start := time.Now()
	seen := make(map[int]bool)
	note := func(pids []int) {
		for _, p := range pids {
			seen[p] = true
		}
	}
	defer func() { rep.Processes = len(seen) }()

	pids, err := s.Pids()
	if err != nil {
		return rep, err
	}
	note(pids)
	if len(pids) == 0 {
		if populated, _ := s.Populated(); !populated {
			rep.Duration = time.Since(start)
			return rep, nil
		}
	}

	if opts.Grace > 0 && ctx.Err() == nil {
		graceEnd := start.Add(opts.Grace)
		if opts.BeforeTerm != nil {
			opts.BeforeTerm()
		}
		signalled := make(map[int]bool)
		if err := s.sweep(unix.SIGTERM, signalled, graceEnd); err != nil {
			return rep, err
		}
		note(keys(signalled))
		empty, err := waitEvent(ctx, s.path, "populated", false, graceEnd)
		if err != nil {
			return rep, err
		}
		if empty {
			rep.Phase, rep.Terminated = PhasePolite, len(seen)
			rep.Duration = time.Since(start)
			return rep, nil
		}
	}

	before := pids
	if opts.Grace > 0 {
		if before, err = s.Pids(); err != nil {
			return rep, err
		}
		note(before)
	}
	rep.Phase, rep.Killed = PhaseKill, len(before)
	rep.Terminated = len(seen) - len(before)
	rep.Method = opts.Method
	if rep.Method == KillAuto {
		rep.Method = s.kill
	}
	if rep.Method, err = s.hardKill(rep.Method); err != nil {
		return rep, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultKillTimeout
	}
	empty, err := waitEvent(context.Background(), s.path, "populated", false, time.Now().Add(timeout))
	rep.Duration = time.Since(start)
	if err != nil {
		return rep, err
	}
	if !empty {
		left, _ := s.Pids()
		note(left)
		for _, p := range left {
			rep.Remaining = append(rep.Remaining, Describe(p))
		}
		return rep, fmt.Errorf("cgroup: kill %s: %d processes remain after %v [%s]: %w",
			s.path, len(left), timeout, procList(rep.Remaining), ErrNotEmpty)
	}
	return rep, nil
}

// hardKill sends the hard kill with method, falling back to weaker methods where the kernel refuses,
// and returns the method that was used.
func (s *Slice) hardKill(method KillMethod) (KillMethod, error) {
	if method == KillFile {
		err := writeFile(s.path, "cgroup.kill", "1")
		switch {
		case err == nil:
			return KillFile, nil
		case errors.Is(err, unix.ENOENT) && !exists(s.path):
			return KillFile, nil // the slice is gone: nothing left to kill
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
			method = KillFreeze // no cgroup.kill (kernel < 5.14) or a threaded cgroup
		default:
			return method, fmt.Errorf("cgroup: kill %s: %w", s.path, err)
		}
	}
	if method == KillFreeze {
		err := writeFile(s.path, "cgroup.freeze", "1")
		if err == nil {
			// Frozen processes cannot fork, so one sweep finds them all. A process in D state may
			// delay "frozen 1"; do not wait long for it, the SIGKILLs are queued either way.
			waitEvent(context.Background(), s.path, "frozen", true, time.Now().Add(time.Second))
			serr := s.sweep(unix.SIGKILL, make(map[int]bool), time.Now().Add(5*time.Second))
			if err := writeFile(s.path, "cgroup.freeze", "0"); err != nil && !errors.Is(err, unix.ENOENT) {
				return method, err
			}
			return KillFreeze, serr
		}
		if !errors.Is(err, unix.ENOENT) {
			return method, err
		}
	}
	return KillSignal, s.sweep(unix.SIGKILL, make(map[int]bool), time.Now().Add(5*time.Second))
}

// sweep signals every process in the slice that is not yet in signalled, re-reading the slice until a
// pass finds no new pid or the deadline passes, and records what it signalled. After SIGTERM it also
// sends SIGCONT, so that stopped processes can act on the SIGTERM.
func (s *Slice) sweep(sig unix.Signal, signalled map[int]bool, deadline time.Time) error {
	for {
		pids, err := s.Pids()
		if err != nil {
			return err
		}
		fresh := pids[:0]
		for _, p := range pids {
			if !signalled[p] {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		handles := openPidfds(fresh)
		// Re-read after opening the pidfds: a pid still listed now is the process the pidfd refers
		// to (the pidfd holds it), never a recycled one.
		now, err := s.Pids()
		if err != nil {
			closeHandles(handles)
			return err
		}
		member := make(map[int]bool, len(now))
		for _, p := range now {
			member[p] = true
		}
		for _, h := range handles {
			signalled[h.pid] = true
			if member[h.pid] {
				h.signal(sig)
				if sig == unix.SIGTERM {
					h.signal(unix.SIGCONT)
				}
			}
		}
		closeHandles(handles)
		if time.Now().After(deadline) {
			return nil
		}
	}
}

// Describe reads a process's state and command name, for reports of what outlived a kill.
func Describe(pid int) Proc {
	p := Proc{Pid: pid, State: "?"}
	if proc, err := procfs.NewProc(pid); err == nil {
		if st, err := proc.Stat(); err == nil {
			p.State, p.Comm = st.State, st.Comm
		}
	}
	return p
}

func procList(ps []Proc) string {
	var b strings.Builder
	for i, p := range ps {
		if i == 8 {
			b.WriteString(" …")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

func keys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
