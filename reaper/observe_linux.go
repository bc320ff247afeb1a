package reaper

import (
	"strconv"
	"time"

	"github.com/cgreaper/reaper/cgroup"
)

// Observer is told what a Reaper does, for metrics. Its methods are called on the Reaper's own
// goroutines as things happen: they must be safe for concurrent use and return promptly. A nil
// Options.Observer observes nothing.
type Observer interface {
	// SessionEnded is called once per session that ran a task, when its teardown is done.
	SessionEnded(SessionEnd)
	// TaskEnded is called once per task, when its end is recorded.
	TaskEnded(TaskEnd)
	// Teardown is called after each run of the kill policy (a session's end, a task stopped or
	// timed out) with what it did.
	Teardown(KillReport)
	// Swept is called once, when the sweep after dead instances that New starts is done.
	Swept(SweepReport)
}

// SessionEnd describes a session that ended.
type SessionEnd struct {
	// ID is the session's id; Name its slice's name ("s-3").
	ID, Name string
	// Reason is why it ended, as given to [Session.CloseFor]: a short fixed word.
	Reason string
	// Tasks is the number of tasks it still had (running, or finished and kept).
	Tasks int
	// Lifetime is the time from its creation to the end of its teardown.
	Lifetime time.Duration
	// Report is what the teardown did; Report.Duration is the whole teardown's time.
	Report KillReport
	// Err is the teardown's error, if any.
	Err error
	// Usage is what its processes used and the limits they hit, as its slice counted them at the end
	// (cgroup containment: UsageCounted; nothing counts them in process containment).
	Usage        cgroup.Stats
	UsageCounted bool
}

// TaskEnd describes a task that ended.
type TaskEnd struct {
	Status     Status
	ExitCode   int
	Background bool
	// OOMKilled reports that the kernel's OOM killer killed a process of the task (see
	// TaskInfo.OOMKilled).
	OOMKilled bool
	Duration  time.Duration
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) SessionEnded(SessionEnd) {}
func (nopObserver) TaskEnded(TaskEnd)       {}
func (nopObserver) Teardown(KillReport)     {}
func (nopObserver) Swept(SweepReport)       {}

// logEnd writes the one log line of a session's end.
func (r *Reaper) logEnd(e SessionEnd) {
	rep := e.Report
	var remaining any = len(rep.Remaining)
	if rep.Unaccounted {
		// The teardown could not look at everything it ended: the count is a floor, not a fact.
		remaining = "unknown (at least " + strconv.Itoa(len(rep.Remaining)) + ")"
	}
	attrs := []any{
		"session", e.ID, "slice", e.Name, "reason", e.Reason, "tasks", e.Tasks,
		"processes_ended", rep.Total(), "by_sigterm", rep.Terminated, "by_cgroup_kill", rep.Killed - rep.Walked,
		"by_walk", rep.Walked, "escapees", rep.Found, "remaining", remaining,
		"lifetime_seconds", seconds(e.Lifetime), "teardown_seconds", seconds(rep.Duration),
	}
	attrs = append(attrs, usageAttrs(e.Usage, e.UsageCounted)...)
	if len(rep.Remaining) > 0 {
		attrs = append(attrs, "remaining_processes", rep.Remaining)
	}
	if e.Err != nil {
		r.log.Warn("session ended", append(attrs, "error", e.Err)...)
		return
	}
	r.log.Info("session ended", attrs...)
}

// seconds is d in seconds, to the microsecond: log lines carry durations as numbers, which JSON
// readers take as they are (slog writes a time.Duration as nanoseconds in JSON, as "1.5s" in text).
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Second)
}
