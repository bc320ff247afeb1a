package reaper

import (
	"time"

	"github.com/cgreaper/reaper/internal/taskout"
)

// A task's output is kept by internal/taskout: each session has a taskout.Store in its directory,
// within Options.OutputBudget, and each task an Output fed by a Pump. These are the types of its
// reads that Session's methods return.
type (
	// Chunk is a piece of a task's output (see taskout.Chunk).
	Chunk = taskout.Chunk
	// Whole is a foreground command's output as a result carries it (see taskout.Whole).
	Whole = taskout.Whole
	// FileInfo says where a task's whole output is (see taskout.FileInfo).
	FileInfo = taskout.FileInfo
	// Progress describes a running foreground command (see taskout.Progress).
	Progress = taskout.Progress
	// Pattern is a grep pattern whose cost was checked (see CompilePattern).
	Pattern = taskout.Pattern
)

// Bounds of one line read of a task's output (OutputOptions.Grep, Tail): it searches at most
// MaxScanBytes of output for at most ScanTime, and a call that stops there says where the next one
// continues (see taskout.Output.Grep).
const (
	MaxScanBytes = taskout.MaxScan
	ScanTime     = taskout.DefaultScanTime
)

// CompilePattern checks a grep pattern for OutputOptions.Grep, its length and its cost, and compiles
// it (see taskout.Compile); its errors say what to change.
func CompilePattern(expr string) (*Pattern, error) { return taskout.Compile(expr) }

// DefaultOutputBudget is the disk space a session's output files may take by default.
const DefaultOutputBudget = taskout.DefaultBudget

// DefaultTotalOutputBudget is the disk space all sessions' output files may take together where the
// size of the state directory's file system cannot be read.
const DefaultTotalOutputBudget = 1 << 30

// ttyEnd bounds how long a terminal task's end waits for its output's end (see Session.watch): what a
// process left holding the terminal keeps it open, so this much is waited for then.
const ttyEnd = 250 * time.Millisecond
