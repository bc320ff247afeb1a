package reaper

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/taskout"
)

// Containment is how a Reaper keeps track of the processes a session starts.
type Containment int

const (
	// ContainAuto uses cgroups where cgroup2 is writable and falls back to process containment,
	// unless a cgroup root was asked for explicitly (Options.Cgroup): that one must work.
	ContainAuto Containment = iota
	// ContainCgroup requires cgroup containment; New fails where it is not possible.
	ContainCgroup
	// ContainProcess uses process groups, the environment marker, the subreaper and the /proc walk
	// only, even where cgroups are available. An explicit cgroup root with it is an error.
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
	for c := range ContainProcess + 1 {
		if s == c.String() || s == "" {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown containment %q (want auto, cgroup or process)", s)
}

// PIDNamespace says whether each session's tasks run in a PID namespace of the session's own.
type PIDNamespace int

const (
	// PIDNamespaceAuto uses PID namespaces where this process can make them (as root or with
	// CAP_SYS_ADMIN, or through an unprivileged user namespace), and goes without where it cannot, or
	// where the namespace could not have a /proc of its own (tasks would see pids not theirs).
	PIDNamespaceAuto PIDNamespace = iota
	// PIDNamespaceOn requires them: New fails where they cannot be made.
	PIDNamespaceOn
	// PIDNamespaceOff runs tasks in this process's PID namespace.
	PIDNamespaceOff
)

// String names the setting as ParsePIDNamespace reads it.
func (p PIDNamespace) String() string {
	switch p {
	case PIDNamespaceOn:
		return "on"
	case PIDNamespaceOff:
		return "off"
	}
	return "auto"
}

// ParsePIDNamespace parses "auto", "on" or "off".
func ParsePIDNamespace(s string) (PIDNamespace, error) {
	switch s {
	case "auto", "":
		return PIDNamespaceAuto, nil
	case "on":
		return PIDNamespaceOn, nil
	case "off":
		return PIDNamespaceOff, nil
	}
	return 0, fmt.Errorf("unknown pid namespace setting %q (want auto, on or off)", s)
}

// Defaults used for zero fields of Options (a nil Grace).
const (
	DefaultGrace        = 5 * time.Second
	DefaultCloseTimeout = kill.DefaultTimeout
	DefaultMaxTasks     = 10
	DefaultRetention    = time.Hour
	// MaxCommandBytes is the largest command accepted: Linux limits one argument to 128 KiB.
	MaxCommandBytes = 100 << 10
)

// Options configures a Reaper. The zero value is ready to use: automatic containment under a child
// "reaper" of the process's own cgroup, bash (or sh), a 5 s grace period, 10 background tasks per
// session, 64 MiB of output files per session. [Reaper.Limits] reports the values in effect.
//
// A zero field means the setting's default, which for BackgroundTimeout and AutoBackground is off.
// Grace, whose default is not off but which can be, is a pointer: nil means the default and a pointer
// to zero SIGKILL at once. A negative value means nothing and New refuses it.
type Options struct {
	// Containment chooses cgroup or process containment; zero means ContainAuto.
	Containment Containment
	// Cgroup configures the slice root (see cgroup.Options); zero means the default root, a child
	// "reaper" of this process's own cgroup. A Root or Mountpoint set here is explicit: if it
	// cannot be used, New fails in every containment mode rather than fall back.
	Cgroup cgroup.Options
	// RuntimeDir is the user's runtime directory ($XDG_RUNTIME_DIR): a Reaper that is not root and
	// cannot take its own cgroup over asks the user's systemd manager on its "bus" for a scope of
	// its own (see ContainmentInfo.Scope). Empty means /run/user/UID.
	RuntimeDir string

	// PIDNamespace says whether each session's tasks run in a PID namespace of the session's own (see
	// the package documentation); zero means PIDNamespaceAuto.
	PIDNamespace PIDNamespace
	// PrivateTmp gives each session an empty /tmp and /dev/shm of its own (tmpfs mounts its init
	// makes), which go with the session. It needs PID namespaces (New fails without), and a session's
	// working directory may not be below /tmp or /dev/shm. False means the host's, shared.
	PrivateTmp bool

	// Grace is how long processes get between SIGTERM and the hard kill when a session closes or a
	// task is stopped; zero means SIGKILL at once. Nil means DefaultGrace.
	Grace *time.Duration
	// CloseTimeout bounds the wait for processes to disappear after the hard kill; what is left then
	// is reported, not waited for. Zero means DefaultCloseTimeout.
	CloseTimeout time.Duration

	// User, if set, is who tasks run as, with its groups and HOME, USER and LOGNAME, no
	// capabilities and no_new_privs (see User); this process must be allowed to switch to it (root).
	// New fails if the user cannot run the shell in WorkDir. Nil means this process's user.
	User *User

	// Shell is the shell that runs commands with -c. Empty means bash from PATH, or /bin/sh where
	// bash is missing.
	Shell string
	// NoReadyShell turns off the ready shell: by default, where the shell is bash, a session that has
	// run two foreground commands keeps a bash started ahead for its next one (see ready_linux.go).
	NoReadyShell bool
	// Env is the environment of tasks, before the markers are added. Nil means this process's
	// environment without its REAPER_* variables (which may hold secrets such as a token) and
	// without NOTIFY_SOCKET (the service manager's socket, reaper's to use).
	Env []string
	// WorkDir is a new session's working directory, relative to this process's; empty means this
	// process's.
	WorkDir string
	// StateDir is where the Reaper makes its state directory (its sessions' records, and the record a
	// later Reaper sweeps up after it by). It is made (mode 0700) if missing, and must be this
	// process's user's alone: owned by it, writable by nobody else, below directories only root or it
	// can change; New refuses it otherwise. Empty means /run/reaper as root, else
	// $XDG_RUNTIME_DIR/reaper, else reaper-<uid> in the temporary directory or /dev/shm, the first that
	// exists or can be made. Reapers that share a slice root should share it.
	StateDir string
	// Announce, if set, receives the Instance record as one line of JSON once the Reaper is set up:
	// a guard process reads it to know what to clean up if this process dies (see internal/guard).
	Announce io.Writer
	// NoSweep skips the sweep after dead instances (see internal/sweep) that New starts in the background.
	NoSweep bool

	// MaxTasks is the most background tasks a session may have running at once. As many finished
	// ones are kept for their output (until it is read to the end, or Retention passes); past
	// that the oldest are cleared. Zero means DefaultMaxTasks.
	MaxTasks int
	// OutputBudget is the disk space, in bytes, that the files holding a session's output may take
	// together (see internal/taskout for what is removed or cut then). Zero means DefaultOutputBudget.
	OutputBudget int64
	// TotalOutputBudget is the disk space the output files of all sessions may take together, so
	// that many sessions, each within OutputBudget, cannot fill the state directory together. Zero
	// means a quarter of the state directory's file system (DefaultTotalOutputBudget where its size
	// cannot be read), and at least OutputBudget.
	TotalOutputBudget int64
	// Retention is how long a finished background task is kept when its output is not read to the
	// end. Zero means DefaultRetention.
	Retention time.Duration
	// BackgroundTimeout is a safety net: a background task still running after it is killed and
	// marked timed_out. Zero means none (the default).
	BackgroundTimeout time.Duration
	// AutoBackground turns a foreground command still running after this long into a background
	// task: the caller gets its id instead of waiting. Zero means off (the default).
	AutoBackground time.Duration

	// SessionLimits are written into each session's slice when it is made (cgroup.Limits: memory,
	// processes, CPU), and the controllers they need are enabled below the root. A controller the
	// host does not offer makes New fail with ContainCgroup, naming it; with ContainAuto the limits
	// that need it are not applied, and a warning says so (ContainmentInfo.LimitsDropped). With
	// ContainProcess any limit is an error. The zero value limits nothing.
	SessionLimits cgroup.Limits

	// Logger receives what the Reaper does (one line per session end, what was killed). Nil
	// discards.
	Logger *slog.Logger
	// Observer is told what happens, for metrics. Nil observes nothing.
	Observer Observer
}

// Limits are the bounds and periods a Reaper applies: its Options with every default filled in,
// each field the Options field of its name. A zero duration here means "none", as everywhere; never
// "the default".
type Limits struct {
	Grace, CloseTimeout time.Duration
	MaxTasks            int
	// OutputTail is the most of its last output that a task whose file the budget cut keeps.
	OutputBudget, OutputTail int64
	// TotalOutputBudget is resolved once the state directory is open (see New).
	TotalOutputBudget                            int64
	Retention, BackgroundTimeout, AutoBackground time.Duration
}

// check refuses negative settings, which mean nothing (see Options).
func (o Options) check() error {
	if o.PrivateTmp && o.PIDNamespace == PIDNamespaceOff {
		return fmt.Errorf("%w: a private /tmp (Options.PrivateTmp) needs PID namespaces, which are off", ErrBadInput)
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"Grace", o.Grace != nil && *o.Grace < 0}, {"CloseTimeout", o.CloseTimeout < 0}, {"MaxTasks", o.MaxTasks < 0},
		{"OutputBudget", o.OutputBudget < 0}, {"TotalOutputBudget", o.TotalOutputBudget < 0}, {"Retention", o.Retention < 0},
		{"BackgroundTimeout", o.BackgroundTimeout < 0}, {"AutoBackground", o.AutoBackground < 0},
	} {
		if f.neg {
			return fmt.Errorf("%w: Options.%s is negative (zero means the default)", ErrBadInput, f.name)
		}
	}
	return nil
}

// limits resolves the options' zero values. It is the only place that does.
func (o Options) limits() Limits {
	l := Limits{
		Grace: DefaultGrace, Retention: cmp.Or(o.Retention, DefaultRetention), AutoBackground: o.AutoBackground,
		CloseTimeout: cmp.Or(o.CloseTimeout, DefaultCloseTimeout), MaxTasks: cmp.Or(o.MaxTasks, DefaultMaxTasks),
		OutputBudget: cmp.Or(o.OutputBudget, DefaultOutputBudget), BackgroundTimeout: o.BackgroundTimeout,
	}
	if o.Grace != nil {
		l.Grace = *o.Grace
	}
	l.OutputTail = min(taskout.MaxTail, l.OutputBudget/4)
	return l
}

// Errors returned by sessions. They are wrapped with the session and task ids.
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
	// ErrBadInput is returned for an argument over its bound, such as a description over
	// MaxDescriptionBytes.
	ErrBadInput = errors.New("bad input")
)
