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
// program's own cgroup as its cgroupfs mount shows it, or the root that [Options] names. Where its own
// cgroup is delegated to it or controllers must be enabled in it, the program first moves itself into
// a leaf "supervisor" of it (see cgroup.Options.Delegated); never on the machine's root cgroup. Each
// Reaper makes one slice for itself below the root, which [Reaper.Close] removes. A root that was
// asked for and cannot be used makes [New] fail, whatever the containment mode.
//
// A [Session] runs tasks: foreground commands, which return as soon as the command's main process
// has exited (never waiting for pipe EOF, which an escaped grandchild may hold forever), and
// background tasks with a status, bounded output that can be read incrementally, a wait and a stop.
// The session's working directory persists across its foreground commands; environment variables do
// not. [Session.Close] kills everything by the kill policy (internal/kill), to which it hands what it
// knows as data (kill.Scope): SIGTERM, a grace period, cgroup.kill, then walks of /proc for whatever
// got out of the slice (by parent pid and by the REAPER_SESSION marker every task inherits) until a
// pass finds nothing new, the check for escapees, and the slice's removal.
//
// PID namespaces. Where this process can make them (Options.PIDNamespace), each session's tasks run
// in a PID namespace of the session's own, whose init (internal/pidns) starts them: when the init
// dies, by the session's end or because this process died by any cause, the kernel kills every
// process in the namespace, and no process can leave it. It is not a sandbox (see pidns_linux.go).
//
// Escapees. A process can clear its environment, double-fork, call setsid and, as root, move itself
// out of its slice; what it cannot leave is the Reaper's child table (the Reaper is the child
// subreaper), or, with PID namespaces, its session's init's (see adopted_linux.go). A process moved
// into another session's slice belongs to the session that started it, by its marker and its
// ancestry, and also dies with any session whose slice it sits in.
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
// (cgroup, internal/proc, reap, pidns, instance and sweep) are the only ones that signal, wait for or
// identify processes; the guard (internal/guard) and `reaper ps` (internal/inspect) are the command's.
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
// The package is a library, which programs outside this module may import as mcpserver and job do:
// its exported identifiers name its own types (or cgroup's), never an internal package's, converted
// where they cross (test/layout holds it to that).
//
// The package is Linux-only; elsewhere it holds only Budget, which mcpserver names on every system.
package reaper
