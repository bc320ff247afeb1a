// Package proc identifies processes through /proc and signals them without pid-reuse races.
//
// It is reaper's one view of processes: a [Walker] reads /proc/<pid>/stat and environ with raw system
// calls into reused buffers and answers "which processes belong to this scope" by parent pid, by an
// inherited environment marker and by thread ids listed in a cgroup; a [Handle] is a process pinned by a
// pidfd and checked against the start time the walk saw, so a signal sent through it can never reach a
// process that reused the pid; [Describe] names a process for reports. It never waits for (reaps) a
// process: exit statuses belong to the program's one wait4 loop.
//
// Processes that vanish while they are read or signalled (ENOENT, ESRCH) are normal, not errors.
//
// The package is Linux-only; elsewhere it is empty.
package proc
