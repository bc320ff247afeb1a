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
// made it. A root that was asked for and cannot be used makes [New] fail, whatever the containment
// mode: only the default falls back.
//
// A [Session] runs tasks: foreground commands, which return as soon as the command's main process
// has exited (never waiting for pipe EOF, which an escaped grandchild may hold forever), and
// background tasks with a status, bounded output that can be read incrementally, a wait and a stop.
// The session's working directory persists across its foreground commands; environment variables do
// not. From its second foreground command on, a session keeps the next one's shell started ahead
// (see ready_linux.go). [Session.Close] kills everything, by the kill policy (internal/kill), to
// which it hands what it knows as data (kill.Scope: the slice, the inits, the processes it
// remembers, its running tasks' main processes pinned by pidfds, where escapees go): SIGTERM, a grace
// period, cgroup.kill, then a walk of /proc for whatever got out of the slice (by parent pid and by
// the REAPER_SESSION marker every task inherits), repeated until a pass finds nothing new; the check
// for escapees; then the slice is removed. In cgroup containment the first walk waits for the slice
// to empty: with PID namespaces it starts below the init, which signals its namespace too
// (kill.Scope.Namespaced); without, from the Reaper's adopted children outside every slice, where
// what left the slice is once its parent has died (kill.Scope.Escapees).
//
// PID namespaces. Where this process can make them (Options.PIDNamespace), each session's tasks run
// in a PID namespace of the session's own, whose init is this program in another mode, which starts
// them (internal/pidns): when the init dies, by the session's end or because this process died by any
// cause (its parent-death signal is SIGKILL), the kernel kills every process in the namespace, and no
// process can leave it. Inside, /proc is the namespace's, so ps, top and kill see the session's
// processes only; nothing else changes for tasks (same files, network, users, environment), and it is
// not a sandbox. Outside, everything goes by the pids this process sees. See pidns_linux.go.
//
// Escapees. A process can clear its environment, double-fork, call setsid and, as root, move itself
// out of its slice; what it cannot leave is the Reaper's child table (the Reaper is the child
// subreaper), or, with PID namespaces, its session's init's. A child of the Reaper or of an init that
// is not a task's main process and sits outside every slice of the Reaper moved itself out: it is
// killed with what it started, every two seconds, and a child of the Reaper also at the end of every
// session, one of an init with that init's session. In process containment an adopted orphan without
// a live session's marker, and not remembered by a live session, cannot be attributed: it dies at the
// end of the next session to end, which may not be its own (see adopted_linux.go).
//
// A process moved into another session's slice belongs to the session that started it, by its marker
// and its ancestry, and also dies with any session whose slice it sits in; listings show it where it
// runs. One that also cleared its marker and lost its parent is the slice's session's; with PID
// namespaces it still dies with the session that started it too, whose namespace it cannot leave.
//
// Tasks get no cgroup namespace of their own (CLONE_NEWCGROUP rooted at their leaf). It costs nothing
// that shows, but it stops a process from moving itself out of its leaf only where cgroup2 is mounted
// with nsdelegate, a root task has other ways out, and where clone3 is refused it would be rooted at
// the Reaper's cgroup, not the leaf. And /proc/self/cgroup would read "/", which misleads what locates
// its limits through it (a JVM's container support, a nested reaper). The adoption check catches
// every way out, with or without nsdelegate.
//
// Every input is bounded: commands (MaxCommandBytes), descriptions (MaxDescriptionBytes), task ids;
// a session keeps at most MaxTasks running and MaxTasks finished background tasks, its tasks' output
// files take at most OutputBudget bytes together (internal/taskout keeps them), and a Budget caps
// what a result carries.
//
// The kill policy is the program's only one (internal/kill), and this package and the rooms it uses
// are the only ones that signal, wait for or identify processes: package cgroup supplies cgroupfs
// (cgroup.kill, the freezer, waiting for a slice to empty), internal/proc the /proc walker and pidfd
// handles, internal/reap the wait4 loop, internal/pidns the sessions' inits, internal/instance the
// records, internal/sweep the sweep after dead instances; the guard (internal/guard) and `reaper ps`
// (internal/inspect) are the command's.
//
// Lock order. Each mutex guards the fields that follow it (task.mu: those after it in task). Where
// two are held at once they are taken in this order, never the other way:
//
//	Reaper.mu          a leaf: no other lock, no file-system or process work under it
//	Session.spawnMu    held across a task's start (its leaf, files, init and process), so that
//	                   Close never misses one being started
//	sessionNS.startMu  held across an init's start and the spawn through it
//	Session.recordMu   held across a write of the session's record
//	Session.mu         never held across a fork, an exec, a probe, a wait or a cgroup's mkdir or
//	                   rmdir, nor over a lock that is: reads of a session never wait for a start
//	task.mu
//	sessionNS.mu       a leaf
//	readyShell.mu      a leaf (the ready shell's; spawnMu is the only lock held over it)
//	initPool.leafMu    a leaf, held across the making of the inits' cgroup
//
// Reaper.adoptMu, which the escapee checks take turns by (kill.Escapees.Turns), is held by package
// kill, under none of these and over none of them. Reaper.dropMu, held across the removal of the
// Reaper's slice and state directory (Close, or Abandon, the last resort of a server whose guard
// died), is held under none of these and over none of them but cgroup.Root's.
//
// And below any of them, the locks of the packages reaper calls, which take none of reaper's:
// pidns.Init's (a spawn through the session's init; its registered tasks), reap.Children's (held
// across each fork), cgroup.Root's, taskout's (a task's output and its pump; no read of output
// holds one over work that grows with the output). Methods whose name ends in Locked need
// Session.mu held.
//
// The package is a library: its exported identifiers name its own types (or cgroup's), never an
// internal package's, converted where they cross (test/layout holds it to that).
//
// The package is Linux-only; elsewhere it holds only Budget, which mcpserver names on every system.
package reaper
