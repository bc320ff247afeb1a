package reaper

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/taskout"
	"github.com/cgreaper/reaper/internal/tty"
	"golang.org/x/sys/unix"
)

// Status is where a task is in its life.
type Status string

const (
	// Running: the task's main process has not exited.
	Running Status = "running"
	// Completed: the main process exited with status 0.
	Completed Status = "completed"
	// Failed: the main process exited with another status, or died of a signal it was not sent by
	// reaper.
	Failed Status = "failed"
	// Killed: the task was stopped on request, or its session closed.
	Killed Status = "killed"
	// TimedOut: the task ran past its timeout (a foreground timeout or the background safety net)
	// and was killed.
	TimedOut Status = "timed_out"
)

// Hits are the times a session's processes ran into its limits (see cgroup.Hits).
type Hits = cgroup.Hits

// Terminal reports whether the status is final.
func (s Status) Terminal() bool { return s != Running && s != "" }

// TaskInfo describes a task at one moment.
type TaskInfo struct {
	ID          string
	Command     string
	Description string
	// Background is true for background tasks, including foreground commands that were moved to
	// the background.
	Background bool
	Status     Status
	// ExitCode is the main process's exit status once Status is terminal; 128+n for a death by
	// signal n. It is -1 if the exit could not be observed.
	ExitCode int
	Started  time.Time
	// Ended is zero while the task runs.
	Ended time.Time
	// OOMKilled reports that the kernel's OOM killer killed a process of the task: the session's
	// memory limit (Options.SessionLimits) was reached. Its main process, if that was the one, shows
	// exit code 137 (SIGKILL). It is known in cgroup containment with a memory limit only.
	OOMKilled bool
	// Hits are the session's limits hit while the task ran, once it has ended (cgroup containment
	// with limits only): OOMKills counts the task's own processes (its leaf), the others count the
	// session's slice, whichever of its tasks ran into them (a limit is the session's, not a task's).
	Hits Hits
	// Processes is the number of the task's processes alive when the info was taken, including
	// any the main process left behind after it exited.
	Processes int
	// OutputBytes is the length of the task's output stream so far, dropped bytes included.
	OutputBytes int64
	// File is where the task's whole output is (see FileInfo).
	File FileInfo
	// Input is "pipe" or "tty" for a task whose standard input is open (StartOptions), "" for
	// /dev/null.
	Input string
	// WaitingForInput is set while a process of the running task is blocked reading its input (the
	// terminal's foreground process group, on a terminal): it waits for WriteInput. It is told from
	// /proc (the process's wait channel and the descriptor it reads): a process that waits in
	// select(2) or poll(2) on more than its input, or in an event loop, is not seen waiting.
	WaitingForInput bool
}

// task is one command run by a session. The fields before mu are fixed once the task is started.
type task struct {
	id, command, description string
	started                  time.Time
	pid                      int
	start                    uint64 // start time of the main process
	leaf                     *cgroup.Slice
	out                      *taskout.Output
	pump                     *taskout.Pump
	in                       *tty.Input    // its open standard input; nil: /dev/null
	cwd                      *os.File      // read end of the working-directory pipe (foreground tasks); closed by watch
	base                     hitsBase      // what the leaf and the slice counted when the task started
	done                     chan struct{} // closed when the task is terminal

	// mu guards the fields that follow (lock order: see the package documentation).
	mu         sync.Mutex
	main       proc.Handle // the main process, with its pidfd until its exit is seen
	background bool
	status     Status
	exitCode   int
	ended      time.Time
	stopAs     Status      // the status to record when the main process exits, if reaper ended it
	readToEnd  bool        // the output was read to its end after the task ended
	hits       cgroup.Hits // the limits hit while the task ran (see TaskInfo.Hits), set as it ends
}

// hitsBase is what a task's leaf and its session's slice counted of their limits' hits when the task
// started: what they count when it ends, less this, is what happened while it ran.
type hitsBase struct{ leaf, slice cgroup.Hits }

// closeCwd closes the read end of the working-directory pipe, if the task has one.
func (t *task) closeCwd() {
	if t.cwd != nil {
		t.cwd.Close()
	}
}

// newID returns prefix and 16 random hex digits: unguessable, so an id cannot be used to reach a task
// that was not handed to the caller.
func newID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// stopping records that reaper is ending the task, and with which status, unless it already ended.
// It returns false if the task had already ended.
func (t *task) stopping(as Status) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status.Terminal() {
		return false
	}
	if t.stopAs == "" {
		t.stopAs = as
	}
	return true
}

// pin returns the main process pinned by a pidfd of its own, for a teardown to signal its process
// group with (kill.Scope.Groups): pinned by no pidfd once its exit has been seen.
func (t *task) pin() proc.Handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.main.Dup()
}

// kill sends SIGKILL to the main process through its pidfd, until its exit has been seen; without a
// pidfd it does nothing (a pid alone could name another process once this one is reaped).
func (t *task) kill() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.main.HasFD() {
		return nil
	}
	return t.main.Signal(unix.SIGKILL)
}

// hasExited reports whether the main process has exited, as its pidfd tells at once (see
// proc.Handle.Exited): false without one, or once its exit has been seen.
func (t *task) hasExited() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.main.Exited()
}

// exited closes the main process's pidfd once its exit has been seen.
func (t *task) exited() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.main.Close()
	t.main = proc.NewHandle(t.main.Stat, -1)
}

// finish records the main process's end, and the limits hit while the task ran, and closes done.
func (t *task) finish(code int, hits cgroup.Hits) {
	t.mu.Lock()
	t.exitCode, t.hits = code, hits
	t.ended = time.Now()
	switch {
	case t.stopAs != "":
		t.status = t.stopAs
	case code == 0:
		t.status = Completed
	default:
		t.status = Failed
	}
	t.mu.Unlock()
	close(t.done)
}

func (t *task) isBackground() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.background
}

func (t *task) currentStatus() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// info returns the task's description; processes is filled in by the caller.
func (t *task) info(processes int) TaskInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	ti := TaskInfo{
		ID: t.id, Command: t.command, Description: t.description, Background: t.background,
		Status: t.status, ExitCode: t.exitCode, Started: t.started, Ended: t.ended,
		OOMKilled: t.hits.OOMKills > 0, Hits: t.hits, Processes: processes,
	}
	if t.out != nil {
		ti.OutputBytes, ti.File = t.out.Size(), FileInfo(t.out.File())
	}
	switch {
	case t.in == nil:
	case t.in.TTY():
		ti.Input = "tty"
	default:
		ti.Input = "pipe"
	}
	return ti
}
