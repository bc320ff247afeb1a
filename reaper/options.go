package reaper

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cgreaper/reaper/cgroup"
)

// Containment is how a Reaper keeps track of the processes a session starts.
type Containment int

const (
	// ContainAuto uses cgroups where cgroup2 is writable and falls back to process containment.
	ContainAuto Containment = iota
	// ContainCgroup requires cgroup containment; New fails where it is not possible.
	ContainCgroup
	// ContainProcess uses process groups, the environment marker, the subreaper and the /proc walk
	// only, even where cgroups are available.
	ContainProcess
)

func (c Containment) String() string {
	switch c {
	case ContainCgroup:
		return "cgroup"
	case ContainProcess:
		return "process"
	}
	return "auto"
}

// ParseContainment parses "auto", "cgroup" or "process".
func ParseContainment(s string) (Containment, error) {
	switch s {
	case "auto", "":
		return ContainAuto, nil
	case "cgroup":
		return ContainCgroup, nil
	case "process":
		return ContainProcess, nil
	}
	return 0, fmt.Errorf("reaper: unknown containment %q (want auto, cgroup or process)", s)
}

// Defaults used for zero fields of Options.
const (
	DefaultGrace        = 5 * time.Second
	DefaultCloseTimeout = 10 * time.Second
	DefaultMaxTasks     = 10
	DefaultRetention    = time.Hour
	// MaxCommandBytes is the largest command accepted: Linux limits one argument to 128 KiB.
	MaxCommandBytes = 100 << 10
)

// Options configures a Reaper. The zero value is ready to use: automatic containment under a child
// "reaper" of the process's own cgroup, bash (or sh), a 5 s grace period, 10 background tasks per
// session, 1 MiB of output per task.
type Options struct {
	// Containment chooses cgroup or process containment; zero means ContainAuto.
	Containment Containment
	// Cgroup configures the slice root (see cgroup.Options); zero means the default root.
	Cgroup cgroup.Options

	// Grace is how long processes get between SIGTERM and the hard kill when a session closes or a
	// task is stopped. Zero means DefaultGrace; a negative value skips SIGTERM.
	Grace time.Duration
	// CloseTimeout bounds the wait for processes to disappear after the hard kill; what is left then
	// is reported, not waited for. Zero means DefaultCloseTimeout.
	CloseTimeout time.Duration

	// Shell is the shell that runs commands with -c. Empty means bash from PATH, or /bin/sh where
	// bash is missing.
	Shell string
	// Env is the environment of tasks, before the markers are added. Nil means this process's
	// environment without its REAPER_* variables (which may hold secrets such as a token).
	Env []string
	// WorkDir is a new session's working directory. Empty means this process's.
	WorkDir string

	// MaxTasks is the most background tasks a session may have running at once (finished ones do
	// not count). Zero means DefaultMaxTasks.
	MaxTasks int
	// OutputLimit is how many bytes of output are kept per task (head and tail). Zero means
	// DefaultOutputLimit.
	OutputLimit int
	// Retention is how long a finished background task is kept when its output is not read to the
	// end. Zero means DefaultRetention.
	Retention time.Duration
	// BackgroundTimeout is a safety net: a background task still running after it is killed and
	// marked timed_out. Zero means none.
	BackgroundTimeout time.Duration
	// AutoBackground, if positive, turns a foreground command still running after this long into a
	// background task: the caller gets its id instead of waiting. Zero means off.
	AutoBackground time.Duration

	// Logger receives what the Reaper does (sessions closed, what was killed). Nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.Grace < 0 {
		o.Grace = 0
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.MaxTasks <= 0 {
		o.MaxTasks = DefaultMaxTasks
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Errors returned by sessions. They are wrapped with the session or task id.
var (
	// ErrSessionClosed is returned for work asked of a session after Close.
	ErrSessionClosed = errors.New("session is closed")
	// ErrUnknownTask is returned for a task id the session does not have: never issued, issued by
	// another session, or already cleared.
	ErrUnknownTask = errors.New("unknown task")
	// ErrTooManyTasks is returned when a session already runs MaxTasks background tasks.
	ErrTooManyTasks = errors.New("too many running background tasks")
	// ErrBadCommand is returned for an empty command, one with a NUL byte, or one over
	// MaxCommandBytes.
	ErrBadCommand = errors.New("bad command")
	// ErrReaperClosed is returned for new sessions after the Reaper closed.
	ErrReaperClosed = errors.New("reaper is closed")
)
