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
// In cgroup containment the sessions' slices live below a root: by default a child "reaper" of the
// program's own cgroup as its cgroupfs mount shows it (so never outside its own subtree, even in a
// container that sees the host's hierarchy), or the root that [Options] names, made with its missing
// parents. Where the own cgroup is delegated to the program (a container's cgroup namespace root, a
// systemd Delegate=yes unit) or controllers must be enabled in it, the program first moves itself into
// a leaf "supervisor" of it, as delegated supervisors do (see cgroup.Options.Delegated); never on the
// machine's root cgroup. Each Reaper makes one slice for itself below the root; [Reaper.Close]
// removes it, and the root too when no other Reaper uses it and it is the default one or this Reaper
// made it. A root that was asked for and cannot be
// used makes [New] fail, whatever the containment mode: only the default falls back.
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
