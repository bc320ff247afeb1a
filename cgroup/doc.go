// Package cgroup creates cgroup v2 slices, spawns into them, kills them completely and removes them.
//
// It knows cgroups, paths and pids, and nothing about sessions, MCP or logging policy. A [Root] is the
// directory under which slices live (by default a child "reaper" of the process's own cgroup); a [Slice]
// is one cgroup below it, possibly with nested leaves. [Detect] says what the host offers before anything
// is created: unified or hybrid hierarchy, whether the slice root is writable, whether cgroup.kill exists
// and which controllers are available.
//
// github.com/containerd/cgroups/v3 serves for mode detection and resource files. What it lacks is written
// here: waiting for a cgroup to empty (on cgroup.events rather than by sleeping), a kill that is complete
// and bounded (SIGTERM sweep, grace, cgroup.kill or freeze and SIGKILL, a deadline and a report of what is
// left), removal that retries EBUSY, and self-delegation into a leaf.
//
// The package signals processes only inside slices it manages, verifying each pid through a pidfd before
// the signal, and never waits for (reaps) a process: exit statuses belong to the caller's child reaper.
// Processes that vanish and cgroups that are already gone (ESRCH, ENOENT) are normal, not errors.
package cgroup
