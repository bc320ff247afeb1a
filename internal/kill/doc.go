// Package kill is the program's one kill policy: how a session's or a task's processes, a dead
// instance's slice, a subreaper's leftovers or the escapees of sessions are ended, and how long
// anything waits for them.
//
// [Policy.Terminate] ends a scope in phases (a walk of /proc while the tree is intact, SIGTERM and a
// grace period, the slice's hard kill and the PID namespaces' inits, walks that kill what got out,
// a bounded wait, the check for escapees, the inits let go of and the slice removed). What the caller
// knows comes in as data ([Scope]: the slice, the inits, known pids and start times, the tasks' main
// processes pinned by pidfds, the adopters to look under for escapees and what tells a live session's
// process from one, the channels to wait for or close): the package calls nothing back.
// [Policy.Escapees] is the check for escapees on its own (a Reaper's periodic one), [Policy.Slice]
// the hard kill of a slice alone (cgroup.kill, or the freezer and SIGKILL, or SIGKILL sweeps,
// whichever the kernel offers), [Policy.Everything] the kill of an instance's slice and of whatever
// is left below a subreaper (a Reaper's end, the guard's cleanup after its server), and
// [Policy.Processes] of processes a walk found (the sweep's, by marker). A Reaper's sessions and
// tasks, the guard's cleanup and the sweep after dead instances all kill through it; nothing else in
// the program walks, signals and waits to decide how a process dies. Package cgroup supplies
// cgroupfs, internal/proc the /proc walker and pidfd handles, internal/pidns the inits.
//
// Every call has one clock: one deadline, when every wait for killed processes ends, and one hurry
// signal, the caller's context, which ends a grace period at once and every wait HurryWait later
// (see clock). A teardown cannot be starved of descriptors: its reads of cgroupfs and /proc, its
// pidfds and waits take one from the policy's reserve where the limit refuses one (internal/spare);
// what fails even so is tried again until the deadline; and what it reports as remaining is what a
// last look found alive, with Report.Unaccounted where it could not look.
//
// The package starts no goroutine that outlives a call; it holds no lock but, during the check for
// escapees, the one its caller hands it (Escapees.Turns).
//
// The package is Linux-only; elsewhere it holds only this documentation.
package kill
