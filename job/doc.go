// Package job runs `reaper run`'s job: one command in a session of its own Reaper, its signals, its
// terminal and its timeout, until it and everything it left are gone.
//
// It is a front end of a Reaper for a command line, as mcpserver is for MCP clients. cmd/reaper reads
// the flags and the environment, delivers the signals, writes the report and exits; Run does the
// rest (docs/run.md says how the job sees its terminal and its signals).
//
// The package holds no lock; Run's goroutines end before it returns.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package job
