package e2e

import (
	"bufio"
	"bytes"
	"errors"
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

	"golang.org/x/sys/unix"
)

// A child's peak memory is not what wait4 reports: ru_maxrss is the largest of the child's own peak
// and that of every memory it executed from, and a child started with vfork (as os/exec starts every
// one) executes from its parent's memory, so it reports the test process's own peak (hundreds of MiB
// after TestMemoryBound). runPeak reads the child's own peak (VmHWM of /proc/<pid>/status) instead, at
// the one moment it is whole and final: the child stopped at its exit (PTRACE_EVENT_EXIT), its memory
// still there, before it is released.

// peakRun is how a command run by runPeak ended.
type peakRun struct {
	out      string
	status   unix.WaitStatus
	peak     int64 // VmHWM at exit, in bytes; 0 if the exit was not seen stopped (a SIGKILL)
	timedOut bool
}

// runPeak runs argv (stdin /dev/null, stdout and stderr together) as a traced child, so that it stops
// at each exec and at its exit; SIGKILL ends it after limit. Only the child is traced, not what it
// starts. It returns once the child is reaped and its output read (a process it left that holds the
// output gets 5 s more).
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
		Sys:   &syscall.SysProcAttr{Ptrace: true, PidFD: &pidfd},
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

// traceToExit resumes the tracee pid at each stop until it has exited, and reaps it. It returns its
// status and VmHWM as read when it stopped at its exit.
func traceToExit(pid int) (unix.WaitStatus, int64, error) {
	var peak int64
	first := true
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); errors.Is(err, unix.EINTR) {
			continue
		} else if err != nil {
			return ws, 0, err
		}
		if ws.Exited() || ws.Signaled() {
			return ws, peak, nil
		}
		if !ws.Stopped() {
			continue
		}
		var sig unix.Signal // the signal to deliver: none for the tracer's own stops
		switch {
		case first:
			// The stop after the first exec, before any option was set.
			first = false
			if err := unix.PtraceSetOptions(pid, unix.PTRACE_O_TRACEEXIT|unix.PTRACE_O_TRACEEXEC|unix.PTRACE_O_EXITKILL); err != nil {
				unix.Kill(pid, unix.SIGKILL)
				return ws, 0, err
			}
		case ws.TrapCause() == unix.PTRACE_EVENT_EXIT:
			peak = vmHWM(pid)
		case ws.TrapCause() == unix.PTRACE_EVENT_EXEC:
		default:
			sig = ws.StopSignal() // a signal for the tracee itself (SIGURG, SIGCHLD, ...)
		}
		if err := unix.PtraceCont(pid, int(sig)); err != nil && !errors.Is(err, unix.ESRCH) {
			return ws, 0, err
		}
	}
}

// vmHWM returns the peak resident memory of pid, from /proc/<pid>/status, in bytes; 0 if unreadable.
func vmHWM(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
