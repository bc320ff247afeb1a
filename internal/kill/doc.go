// Package kill is the program's one kill policy: how a session's or a task's processes, a dead
// instance's slice, or a subreaper's leftovers are ended, and how long anything waits for them.
//
// [Policy.Terminate] ends a scope in phases (a walk of /proc while the tree is intact, SIGTERM and a
// grace period, the slice's hard kill and the PID namespaces' inits, walks that kill what got out,
// a bounded wait); [Policy.Slice] is the hard kill of a slice alone (cgroup.kill, or the freezer and
// SIGKILL, or SIGKILL sweeps, whichever the kernel offers) and [Policy.Descendants] the kill of
// whatever is left below a subreaper. A Reaper's sessions and tasks, the guard's cleanup after its
// server, and the sweep after dead instances all kill through it; nothing else in the program
// decides how a process dies. Package cgroup supplies cgroupfs, internal/proc the /proc walker and
// pidfd handles, internal/pidns the inits.
//
// The package holds no lock and starts no goroutine that outlives a call.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package kill
