package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/taskout"
)

// RunOptions configures one foreground command. The zero value runs without a timeout and without
// progress reports.
type RunOptions struct {
	// Timeout kills the command's whole tree when it runs longer; zero means no timeout.
	Timeout time.Duration
	// Description is kept with the task (it shows if the command is moved to the background).
	Description string
	// OnProgress, if set, is called about every ProgressInterval while the command runs, on the
	// calling goroutine.
	OnProgress func(Progress)
	// ProgressInterval is the period of OnProgress; zero means one second.
	ProgressInterval time.Duration
	// TTY, if set, runs the command on a pseudo-terminal of this size (see StartOptions.TTY) instead
	// of with /dev/null as its input and a pipe as its output.
	TTY *TermSize
	// Budget caps the returned Output (see Budget): its middle is left out when it is longer. The
	// zero value caps nothing: the whole output, as kept, comes back.
	Budget Budget
}

// Result is the outcome of a foreground command.
type Result struct {
	// TaskID is set when the command was moved to the background (Options.AutoBackground): it is
	// still running, and the other fields describe it so far.
	TaskID string
	// Output is the command's combined stdout and stderr as valid UTF-8, within RunOptions.Budget:
	// all of it, or its head and tail with a line between them that says what was left out.
	Output string
	// Dropped counts the bytes left out between the head and the tail of Output; DroppedChars and
	// DroppedLines the characters and lines (newlines).
	Dropped, DroppedChars, DroppedLines int64
	// Total is the length of the whole output in bytes; Lines counts its lines.
	Total, Lines int64
	// File is where the whole output is (see FileInfo), and OutputID the task id task_output reads
	// it by (set where there is a file).
	File     FileInfo
	OutputID string
	Status   Status
	ExitCode int
	TimedOut bool
	// OOMKilled reports that the kernel's OOM killer killed a process of the command (see
	// TaskInfo.OOMKilled).
	OOMKilled bool
	// Hits are the session's limits hit while the command ran (see TaskInfo.Hits), once it has ended.
	Hits Hits
	// Cwd is the session's working directory after the command.
	Cwd string
	// Leftover counts processes the command left running (for example `server &`); they stay in the
	// session and die with it at the latest.
	Leftover int
	Duration time.Duration
	// Notice tells of something the caller should know, such as a working directory that vanished
	// and was reset.
	Notice string
}

// Run runs command in the foreground: it returns as soon as the command's main process has exited,
// never waiting for pipe EOF (a background grandchild may hold the pipe forever), with everything the
// main process wrote. On timeout, or when ctx is done, the command's whole tree is killed; the
// result says so (and with ctx, the error is ctx's).
func (s *Session) Run(ctx context.Context, command string, opts RunOptions) (res Result, err error) {
	t, notice, err := s.start(command, launch{description: opts.Description, tty: opts.TTY})
	if err != nil {
		return Result{}, err
	}
	// The session's record (for `reaper ps`) lists the task once it has run for recordDelay, left
	// processes behind or moved to the background: a command that ends sooner with nothing left
	// costs no file write on the path its caller waits on, and appears in the record at its next one.
	recordC := time.After(recordDelay)
	defer func() {
		if recordC != nil && (res.Leftover > 0 || res.TaskID != "") { // processes left, or moved to the background
			s.record()
		}
	}()
	var timeoutC, autoC, tickC <-chan time.Time
	if opts.Timeout > 0 {
		timeoutC = time.After(opts.Timeout)
	}
	if d := s.r.lim.AutoBackground; d > 0 {
		autoC = time.After(d)
	}
	if opts.OnProgress != nil {
		every := opts.ProgressInterval
		if every <= 0 {
			every = time.Second
		}
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		tickC = ticker.C
	}
	// Once the command has ended and its result is made, the next one's shell starts (see
	// ready_linux.go): its working directory is known then, and its fork is off this call's path.
	for {
		select {
		case <-t.done:
			defer s.ready.keep()
			return s.finalResult(t, notice, opts.Budget), nil
		case <-timeoutC:
			s.end(t, TimedOut)
			defer s.ready.keep()
			return s.finalResult(t, notice, opts.Budget), nil
		case <-ctx.Done():
			s.end(t, Killed)
			defer s.ready.keep()
			return s.finalResult(t, notice, opts.Budget), ctx.Err()
		case <-autoC:
			if s.promote(t) {
				res := s.result(t, notice, opts.Budget)
				res.TaskID = t.id
				return res, nil
			}
		case <-tickC:
			opts.OnProgress(Progress(t.out.Progress(time.Since(t.started))))
		case <-recordC:
			s.record()
			recordC = nil
		}
	}
}

// recordDelay is how long a foreground command runs before the session's record lists it (see Run).
const recordDelay = 50 * time.Millisecond

// end kills the task's tree, recording status as, and waits (bounded) for its end.
func (s *Session) end(t *task, as Status) {
	if t.stopping(as) {
		s.killTask(context.Background(), t)
	}
	select {
	case <-t.done:
	case <-time.After(s.r.lim.CloseTimeout):
	}
}

// promote moves a running foreground task to the background, if a background slot is free.
func (s *Session) promote(t *task) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runningBackgroundLocked() >= s.r.lim.MaxTasks {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status.Terminal() {
		return false
	}
	t.background = true
	return true
}

// finalResult describes a foreground task that ended, then frees its output buffer: the output has
// been returned, and what leftover processes write later is not kept, and read only now and then.
func (s *Session) finalResult(t *task, notice string, budget Budget) Result {
	res := s.result(t, notice, budget)
	t.out.Discard()
	// Ending the output may have moved its tail into the file, shortening the head: describe the
	// file as it now stays.
	res.File = FileInfo(t.out.File())
	if t.pump != nil {
		t.pump.Slow() // what leftover processes write is discarded: read it rarely (see pump)
	}
	return res
}

// result describes a foreground task now; its output counts as read.
func (s *Session) result(t *task, notice string, budget Budget) Result {
	wh, err := t.out.All(!t.currentStatus().Terminal(), budget.budget())
	if err != nil {
		// The file could not be read back (a root task may have replaced it): the result says so
		// and keeps everything else, its exit status first.
		wh.Text = fmt.Sprintf("[the output could not be read back from its file: %v]\n", err)
	}
	info := t.info(0)
	res := Result{
		Output: wh.Text, Dropped: wh.Dropped, DroppedChars: wh.DroppedChars, DroppedLines: wh.DroppedLines,
		Total: wh.Total, Lines: wh.Lines, File: FileInfo(t.out.File()),
		Status: info.Status, ExitCode: info.ExitCode, TimedOut: info.Status == TimedOut, OOMKilled: info.OOMKilled,
		Hits: info.Hits, Cwd: s.Cwd(), Duration: time.Since(t.started), Notice: notice,
	}
	if res.File.Path != "" {
		res.OutputID = t.id
	}
	if info.Status.Terminal() {
		if t.leaf != nil {
			if populated, _ := t.leaf.Populated(); populated {
				pids, _ := t.leaf.Pids()
				res.Leftover = len(pids)
			}
		} else {
			self, _, _ := s.walkRoot()
			left := proc.NewWalker().Orphans(self, EnvTask+"="+t.id)
			s.rememberProcs(left)
			res.Leftover = len(left)
		}
	}
	return res
}

// Start runs command as a background task with description and returns at once: StartWith with
// only a description.
func (s *Session) Start(command, description string) (TaskInfo, error) {
	return s.StartWith(command, StartOptions{Description: description})
}

// StartWith runs command as a background task and returns at once.
func (s *Session) StartWith(command string, opts StartOptions) (TaskInfo, error) {
	t, _, err := s.start(command, launch{description: opts.Description, background: true, stdin: opts.Stdin, tty: opts.TTY})
	if err != nil {
		return TaskInfo{}, err
	}
	s.record()
	return t.info(1), nil
}

// Wait blocks until the task ends, timeout passes or ctx is done, and describes it.
func (s *Session) Wait(ctx context.Context, id string, timeout time.Duration) (TaskInfo, error) {
	t, err := s.lookup(id)
	if err != nil {
		return TaskInfo{}, err
	}
	select {
	case <-t.done:
	case <-time.After(timeout):
	case <-ctx.Done():
		return s.info(t), ctx.Err()
	}
	return s.info(t), nil
}

// OutputOptions selects what Output returns. The zero value reads what is new since the previous read.
type OutputOptions struct {
	// Offset, if set, reads from this byte position of the stream instead of continuing where the
	// previous read ended. Reads continue from where this one ends.
	Offset *int64
	// Budget caps the returned text (see Budget): the read ends earlier and the next one continues
	// there.
	Budget Budget
	// Grep, if set, returns only the lines that it matches (see MaxScanBytes for the bounds of one
	// read's search).
	Grep *Pattern
	// Tail, if positive, returns the last Tail lines of the output (of those Grep matches, if set)
	// instead of reading from an offset; the cursor moves to the end.
	Tail int
}

// Output returns the task's output that is new since the previous read (or from opts.Offset, or its
// last lines), and the task's state. Reading a finished task's output to its end lets the task be
// cleared. A cleared task whose output file the session keeps (a foreground command's, say) can still
// be read; its info is as it ended. A line read (Grep, Tail) stops when ctx is done or the session
// ends, with an error, and at its time and work limits (see MaxScanBytes).
func (s *Session) Output(ctx context.Context, id string, opts OutputOptions) (TaskInfo, Chunk, error) {
	t, cleared, err := s.lookupOutput(id)
	if err != nil {
		return TaskInfo{}, Chunk{}, err
	}
	if t.out == nil {
		return TaskInfo{}, Chunk{}, fmt.Errorf("session %s: task %s writes to its own files, not to reaper", s.id, id)
	}
	var info TaskInfo
	if cleared {
		info = t.info(0)
	} else {
		info = s.info(t)
	}
	partial := !info.Status.Terminal()
	var tc taskout.Chunk
	switch budget := opts.Budget.budget(); {
	case opts.Tail > 0:
		tc, err = t.out.Tail(ctx, opts.Tail, partial, opts.Grep.pattern(), budget)
	case opts.Grep != nil:
		tc, err = t.out.Grep(ctx, opts.Offset, partial, opts.Grep.pattern(), budget)
	default:
		tc, err = t.out.Read(opts.Offset, partial, budget)
	}
	c := Chunk(tc)
	if err != nil {
		return info, c, fmt.Errorf("session %s: task %s: %w", s.id, id, err)
	}
	if !partial && c.Next == c.Total && !cleared {
		t.mu.Lock()
		t.readToEnd = true
		t.mu.Unlock()
	}
	return info, c, nil
}

// Stop kills the task's whole tree and returns its final state. Stopping a finished task only
// describes it.
func (s *Session) Stop(ctx context.Context, id string) (TaskInfo, KillReport, error) {
	t, err := s.lookup(id)
	if err != nil {
		return TaskInfo{}, KillReport{}, err
	}
	// A task that ended on its own keeps its status, but may have left processes behind: stop
	// means the whole tree either way.
	t.stopping(Killed)
	rep, err := s.killTask(ctx, t)
	select {
	case <-t.done:
	case <-time.After(s.r.lim.CloseTimeout):
		return s.info(t), rep, fmt.Errorf("session %s: stop task %s: main process %d did not exit within %v",
			s.id, id, t.pid, s.r.lim.CloseTimeout)
	}
	return s.info(t), rep, err
}
