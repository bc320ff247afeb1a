// Package cgroup manages cgroup v2 slices through cgroupfs: it creates them, spawns into them, kills and
// empties them, and removes them.
//
// It knows cgroups, paths and pids, and nothing about sessions, MCP, logging policy or how a process
// should be ended. A [Root] is the directory under which slices live (by default a child "reaper" of
// the process's own cgroup); a [Slice] is one cgroup below it, possibly with nested leaves. [Detect]
// says what the host offers before anything is created, and, when something is missing, what was
// found instead. The own cgroup is resolved against what its cgroupfs mount shows (in a container
// with a cgroup namespace but the host's hierarchy bind-mounted, /proc/self/cgroup reads "0::/"), so
// slices never go outside its subtree unless [Options.Root] says so. [OpenRoot] may move the process
// into a leaf of its own cgroup (see [Options.Delegated]); cgroup v1 is never touched.
//
// github.com/containerd/cgroups/v3 (its cgroup2.Manager, always loaded with the slice's mountpoint)
// writes the limits ([Slice.SetLimits]: memory.max with memory.swap.max 0, pids.max, cpu.max) and
// reads the statistics ([Slice.Stats], [Slice.Hits]: cpu.stat, memory.*, pids.current). What it does
// worse, or not at all, is written here, on open, read and write of the interface files:
//   - finding the mount and what it shows, and self-delegation into a leaf: the library knows only
//     /sys/fs/cgroup (Load without a mountpoint silently takes it, which on a hybrid host is the v1
//     hierarchies' tmpfs) and the process's own cgroup as /proc shows it, not as a mount does;
//   - enabling controllers ([Options.Controllers]): its ToggleControllers walks from the top and
//     returns only the last error, where a refusal must name the cgroup and the controller;
//   - cgroup.kill ([Slice.Kill]): where the write fails, its Kill freezes, signals every pid and
//     waits for each one unless the caller is a subreaper, which steals exit statuses from os/exec's
//     waits and, on a manager of the hierarchy's root, would signal every process of the machine;
//   - the freezer: its Freeze returns when cgroup.freeze reads back, before cgroup.events says
//     "frozen 1" ([Slice.Freeze] waits for that, with a deadline);
//   - waiting for a cgroup to empty, on cgroup.events with a deadline and a context: its EventChan
//     watches memory.events only, and its goroutine cannot be stopped by its caller;
//   - removal ([Slice.Remove]): its Delete refuses while processes are listed and does not retry the
//     EBUSY a just-emptied cgroup gives; listing pids: its Procs keeps the 0s of pids in other
//     namespaces and stats every file of the subtree, where a teardown lists a slice several times;
//   - the refused forks (pids.events) and cpu.max, which it does not read, and whether a figure is
//     counted at all: it reads a missing file as 0, so Stats asks cgroup.controllers.
//
// The package never signals, identifies or waits for a process: cgroup.kill is the kernel's, and
// whatever must be done process by process (SIGTERM, the fallbacks where cgroup.kill is missing) is the
// caller's. Cgroups that are already gone (ENOENT) are normal, not errors. Errors carry the path they
// concern.
//
// Lock order. The package has one lock, Root.mu, a leaf: it serializes making a root's directories
// with removing them, and nothing else is locked under it.
//
// The package is Linux-only; elsewhere it holds only [ValidateName].
package cgroup
