package reaper

import (
	"time"

	"github.com/cgreaper/reaper/internal/taskout"
)

// Chunk is a piece of a task's output, as Session.Output returns it.
type Chunk struct {
	// Text is the output between Offset and Next, as valid UTF-8: each run of invalid bytes became
	// U+FFFD. Where the read passed over bytes that were not kept (the middle of an output larger
	// than the session's OutputBudget), a line in Text stands for them (see Skipped). A line read
	// (OutputOptions.Grep, Tail) holds only the lines selected.
	Text string
	// Offset is where the read started in the stream (the requested offset, clamped to what
	// exists); Next is where the following read continues. Both are byte positions.
	Offset, Next int64
	// Skipped counts the bytes between Offset and Next that were not kept.
	Skipped int64
	// Pending counts the kept bytes after Next that this read left for the next one, because of
	// its Budget (with Grep: that it did not search). Zero means the read returned all that exists
	// now; a running task may still write more, and a character it has only partly written yet is
	// not counted.
	Pending int64
	// Total is the length of the whole stream so far, dropped bytes included.
	Total int64
	// Stopped says why a line read stopped before it searched all it could: its time or work
	// limit (MaxScanBytes, ScanTime). Pending then counts the bytes it did not search.
	Stopped string
	// Lines counts the lines of output Text holds, with Grep or Tail (0 otherwise).
	Lines int
}

// FileInfo says where a task's whole output is.
type FileInfo struct {
	// Path is the file; empty where the task has none (it printed nothing, or its file could not be
	// made: NoFile says why).
	Path string
	// Cut says why the file lacks part of the output's middle, or will once the output ends (its
	// tail is then added); empty when it holds every byte.
	Cut string
	// Missing counts the bytes of the middle that the file lacks.
	Missing int64
	// Removed is set once the file was removed to make room for newer output (Options.OutputBudget).
	Removed bool
	// NoFile says why the output has no file, where it printed something.
	NoFile string
}

// Progress describes a running foreground command (RunOptions.OnProgress).
type Progress struct {
	Elapsed time.Duration
	// Bytes and Lines count the output so far (lines by newlines seen).
	Bytes, Lines int64
	// LastLine is the last complete line of output, cut to 200 bytes.
	LastLine string
}

// Pattern is a grep pattern whose cost was checked: see CompilePattern.
type Pattern struct{ p *taskout.Pattern }

// Bounds of one line read of a task's output (OutputOptions.Grep, Tail): it searches at most
// MaxScanBytes of output for at most ScanTime, and a call that stops there says where the next one
// continues (Chunk.Stopped, Next).
const (
	MaxScanBytes = taskout.MaxScan
	ScanTime     = taskout.DefaultScanTime
)

// CompilePattern checks a grep pattern for OutputOptions.Grep, its length and its cost, and compiles
// it (RE2 syntax); its errors say what to change.
func CompilePattern(expr string) (*Pattern, error) {
	p, err := taskout.Compile(expr)
	if err != nil {
		return nil, err
	}
	return &Pattern{p}, nil
}

// pattern is the pattern as taskout takes it; nil for none.
func (p *Pattern) pattern() *taskout.Pattern {
	if p == nil {
		return nil
	}
	return p.p
}

// budget is b as taskout takes it.
func (b Budget) budget() taskout.Budget { return taskout.NewBudget(b.Chars, b.Max, b.Cost) }

// DefaultOutputBudget is the disk space a session's output files may take by default.
const DefaultOutputBudget = taskout.DefaultBudget

// DefaultTotalOutputBudget is the disk space all sessions' output files may take together where the
// size of the state directory's file system cannot be read.
const DefaultTotalOutputBudget = 1 << 30

// ttyEnd bounds how long a terminal task's end waits for its output's end (see Session.watch): what a
// process left holding the terminal keeps it open, so this much is waited for then.
const ttyEnd = 250 * time.Millisecond
