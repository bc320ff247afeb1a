// Package tty opens a task's standard input, a pseudo-terminal or a pipe, and writes to it with a
// deadline.
//
// The terminal is opened from /dev/ptmx and its other side from the master with TIOCGPTPEER, never
// by a path; the master is non-blocking, so that its owner reads the task's output from it and
// writes input to it with a deadline. A pipe's write end is non-blocking for the same reason. An
// Input serialises the writes of its callers, so that two inputs never interleave, and reports a
// task that stops reading (ErrStalled) or an input nothing reads any more (ErrClosed).
package tty
