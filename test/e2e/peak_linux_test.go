package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// A child's peak memory is not what wait4 reports: ru_maxrss is the largest of the child's own peak
// and that of every memory it executed from, and a child started with vfork (as os/exec starts every
// one) executes from its parent's memory, so it reports the test process's own peak (hundreds of MiB
// after TestMemoryBound). runPeak reads the child's own peak (VmHWM of /proc/<tid>/status) instead, at
// the one moment it is whole and final: a thread of the child stopped at its exit
// (PTRACE_EVENT_EXIT), its memory still there, before it is released.
//
// Every thread is traced, not only the first. A Go program exits from whichever thread runs the
// goroutine that calls os.Exit; the other threads, the first among them, are then killed by the
// kernel, and a thread killed that way can leave without stopping at its exit (seen here: a stop for
// SIGURG, then the exit, and no exit stop). The thread that called exit_group is not killed: it
// always stops.

// peakRun is how a command run by runPeak ended.
type peakRun struct {
	out      string
	status   unix.WaitStatus
	peak     int64 // VmHWM at exit, in bytes; 0 if the exit was not seen stopped (a SIGKILL)
	timedOut bool
}

// runPeak runs argv (stdin /dev/null, stdout and stderr together) as a traced child, so that it stops
// at each exec and each of its threads at its exit; SIGKILL ends it after limit. Only the child and
// its threads are traced, not the processes it starts. It returns once the child is reaped and its
// output read (a process it left that holds the output gets 5 s more).
func runPeak(t testing.TB, argv []string, limit time.Duration) peakRun {
	t.Helper()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(&out, pr)
	}()
	// ptrace requests must come from the thread that started the tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pidfd := -1
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{null.Fd(), pw.Fd(), pw.Fd()},
		Sys:   &syscall.SysProcAttr{Ptrace: true, PidFD: &pidfd, Setpgid: true}, // see traceToExit
	}
	pid, err := syscall.ForkExec(path, argv, attr)
	pw.Close()
	if err != nil {
		pr.Close()
		<-read
		t.Fatalf("start %v: %v", argv, err)
	}
	var run peakRun
	var mu sync.Mutex // guards reaped, and pidfd's use by the timer
	reaped := false
	timer := time.AfterFunc(limit, func() {
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			run.timedOut = true
			unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		}
	})
	run.status, run.peak, err = traceToExit(pid)
	timer.Stop()
	mu.Lock()
	reaped = true
	mu.Unlock()
	unix.Close(pidfd)
	if err != nil {
		t.Fatalf("tracing %v: %v", argv, err)
	}
	select {
	case <-read:
	case <-time.After(5 * time.Second):
	}
	pr.Close()
	<-read
	run.out = out.String()
	return run
}

// traceToExit resumes the tracee pid, and each thread it starts (traced from its start), at each
// stop until pid has exited, and reaps them. It returns pid's status and the largest VmHWM read
// when one of them stopped at its exit. pid leads a process group of its own: waiting for that group
// reaps only the tracee's threads, never another child of this process.
func traceToExit(pid int) (unix.WaitStatus, int64, error) {
	var peak int64
	first := true
	seen := map[int]bool{pid: true}
	for {
		var ws unix.WaitStatus
		tid, err := unix.Wait4(-pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		} else if err != nil {
			return ws, 0, fmt.Errorf("wait for the threads of %d: %w", pid, err)
		}
		if ws.Exited() || ws.Signaled() {
			if tid == pid {
				return ws, peak, nil
			}
			continue // a thread of pid, reaped
		}
		if !ws.Stopped() {
			continue
		}
		var sig unix.Signal // the signal to deliver: none for the tracer's own stops
		switch {
		case first && tid == pid:
			// The stop after the first exec, before any option was set.
			first = false
			opts := unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_EXITKILL
			if err := unix.PtraceSetOptions(pid, opts); err != nil {
				unix.Kill(pid, unix.SIGKILL)
				return ws, 0, err
			}
		case !seen[tid]:
			// A new thread's first stop (a SIGSTOP of the kernel's, not to be delivered).
			seen[tid] = true
		case ws.TrapCause() == unix.PTRACE_EVENT_EXIT:
			peak = max(peak, vmHWM(tid))
		case ws.TrapCause() == unix.PTRACE_EVENT_EXEC, ws.TrapCause() == unix.PTRACE_EVENT_CLONE:
		default:
			sig = ws.StopSignal() // a signal for the tracee itself (SIGURG, SIGCHLD, ...)
		}
		if err := unix.PtraceCont(tid, int(sig)); err != nil && !errors.Is(err, unix.ESRCH) {
			return ws, 0, err
		}
	}
}

// vmHWM returns the peak resident memory of the process of thread tid, from /proc/<tid>/status, in
// bytes; 0 if unreadable.
func vmHWM(tid int) int64 {
	v, _ := testutil.StatusField(tid, "VmHWM")
	kb, _ := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	return kb << 10
}
