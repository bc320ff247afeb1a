// Package job runs `reaper run`'s job: one command in a session of its own Reaper, its signals, its
// terminal and its timeout, until it and everything it left are gone.
//
// It sits above package reaper, beside mcpserver: both are front ends of a Reaper, one for a command
// line, the other for MCP clients. cmd/reaper reads the flags and the environment, delivers the
// signals, writes the report and exits; Run does the rest: the command runs in the foreground of the
// terminal it was started from (taking it from the guard's process group and giving it back), signals
// are passed on to its process group, INT and TERM start the grace period and a second one or the
// guard's death ends everything at once, and when the command exits, what it left is named and
// killed.
//
// The package holds no lock; Run's goroutines end before it returns.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package job
