// Package reaper runs shell commands for sessions and guarantees that when a session closes nothing it
// started survives: no orphan, no zombie, no leftover cgroup, and no hang.
//
// A [Reaper] owns every process the program starts. It makes the program a child subreaper, runs the
// program's only wait4 loop, and decides the containment mode once: cgroup containment, where each
// session gets a cgroup v2 slice (created on its first command) and each task a leaf inside it that
// its processes are born into; or process containment, where cgroups are not writable (a read-only
// cgroupfs in a non-privileged pod, no cgroup2, not root) and process groups, an environment marker
// and a walk of /proc stand in for the cgroup.
//
// A [Session] runs tasks: foreground commands, which return as soon as the command's main process
// has exited (never waiting for pipe EOF, which an escaped grandchild may hold forever), and
// background tasks with a status, bounded output that can be read incrementally, a wait and a stop.
// The session's working directory persists across its foreground commands; environment variables do
// not. [Session.Close] kills everything: SIGTERM, a grace period, cgroup.kill, then a walk of /proc
// for whatever got out of the slice (by parent pid and by the REAPER_SESSION marker every task
// inherits), repeated until a pass finds nothing new; then the slice is removed.
//
// That kill policy is the program's only one, and this package is the only one that signals, waits for
// or identifies processes: package cgroup supplies cgroupfs (cgroup.kill, the freezer, waiting for a
// slice to empty) and internal/proc the /proc walker and pidfd handles it uses.
//
// The package is Linux-only; elsewhere it is empty.
package reaper
