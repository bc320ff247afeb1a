// Package cgroup manages cgroup v2 slices through cgroupfs: it creates them, spawns into them, kills and
// empties them, and removes them.
//
// It knows cgroups, paths and pids, and nothing about sessions, MCP, logging policy or how a process
// should be ended. A [Root] is the directory under which slices live (by default a child "reaper" of
// the process's own cgroup); a [Slice] is one cgroup below it, possibly with nested leaves. [Detect]
// says what the host offers before anything is created: unified or hybrid hierarchy, whether the
// slice root is writable, whether cgroup.kill and the freezer exist and which controllers are
// available.
//
// github.com/containerd/cgroups/v3 serves for mode detection and resource files. What it lacks is written
// here: waiting for a cgroup to empty (on cgroup.events rather than by sleeping), removal that retries
// EBUSY, and self-delegation into a leaf.
//
// The package never signals, identifies or waits for a process: cgroup.kill is the kernel's, and
// whatever must be done process by process (SIGTERM, the fallbacks where cgroup.kill is missing) is the
// caller's. Cgroups that are already gone (ENOENT) are normal, not errors. Errors carry the path they
// concern.
//
// The package is Linux-only; elsewhere it holds only [ValidateName].
package cgroup
