// Package proc identifies processes through /proc and signals them without pid-reuse races.
//
// It is reaper's one view of processes: a [Walker] reads /proc/<pid>/stat and environ with raw system
// calls into reused buffers and answers "which processes belong to this scope" by parent pid, by an
// inherited environment marker and by thread ids listed in a cgroup; a [Handle] is a process pinned by a
// pidfd and checked against the start time the walk saw, so a signal sent through it can never reach a
// process that reused the pid; [Describe] names a process for reports. It never waits for (reaps) a
// process: exit statuses belong to the program's one wait4 loop. Processes that vanish while they are
// read or signalled (ENOENT, ESRCH) are normal, not errors.
//
// prometheus/procfs reads what nobody waits on in bulk: a process's cgroup ([Cgroup]) and its status
// ([Walker.Switches]). What a teardown, the sweep or a listing reads of every process is read by hand,
// because procfs does measurably worse there or cannot do it (BenchmarkProcfs, 1,100 processes on 2
// loaded CPUs, procfs v0.22):
//
//   - a walk of every process: 14 ms by hand, 36 ms with procfs, which parses 42 fields of each stat
//     with fmt.Fscan; one stat, 8 µs against 17; [Describe], 20 µs against 68 (procfs's StartTime
//     reads all of /proc/stat each time);
//   - bounds on what a process controls: [CommandLine] reads 512 bytes where procfs reads every
//     argument, up to 1 MiB (2.8 ms and 4.3 MB for that); the environment ([Walker.Marked],
//     [Walker.Env]) is streamed in a 64 KiB buffer where procfs reads it whole, up to 1 MiB, and misses
//     a marker past it; and an environment that shows empty during an execve is read again;
//   - what procfs does not read: the children files of a process's threads, /proc/<pid>/syscall, one
//     descriptor's link, the count of tasks in /proc/loadavg, /proc/uptime, and files read relative to
//     an open /proc/<pid> ([Walker.Childless], which pins the process while it reads).
//
// The package is Linux-only; elsewhere it is empty.
package proc
