// Package tty opens a task's standard input, a pseudo-terminal or a pipe, and writes to it with a
// deadline.
//
// The terminal's other side is opened from the master with TIOCGPTPEER, never by a path. An Input
// serialises the writes of its callers, so that two inputs never interleave.
package tty
