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
// prometheus/procfs reads what nobody waits on in bulk: a process's cgroup ([Cgroup], for `reaper
// ps`) and its status ([Walker.Switches], for a task's input). What a teardown, the sweep or a listing
// reads of every process is read by hand, because procfs does measurably worse there or cannot do it.
// BenchmarkProcfs runs both side by side (median of 7, 2 CPUs at a load of 6, 1,100 processes;
// procfs v0.22):
//
//   - the walk of every process (a teardown's scan, the sweep's): 14 ms by hand, 36 ms with procfs,
//     which makes a Proc and parses 42 fields of each stat with fmt.Fscan (0.17 MB against 1.6 MB
//     allocated); a teardown may walk several times, and the user waits for it;
//   - one stat (each process a teardown checks before and after signalling it): 8 µs against 17;
//   - [Describe], which a teardown calls for every process it kills: 20 µs against 68 (procfs's
//     StartTime reads all of /proc/stat each time);
//   - [CommandLine]: procfs reads every argument, up to 1 MiB, where reaper shows 512 bytes: 6 µs
//     against 10 for a usual command, 6 µs against 2.8 ms and 4.3 MB for 1 MiB of arguments, which a
//     task chooses;
//   - the environment ([Walker.Marked], [Walker.Env]): procfs reads it whole, up to 1 MiB, and splits
//     it: 19 µs against 154 and 222 KB for 64 KiB of it, and a marker past the first MiB is missed;
//     the package streams it in a 64 KiB buffer, and reads again an environment that shows empty
//     during an execve;
//   - what procfs does not read: the children files of a process's threads, /proc/<pid>/syscall, one
//     descriptor's link (procfs reads them all), the count of tasks in /proc/loadavg, /proc/uptime,
//     and files read relative to an open /proc/<pid> ([Walker.Childless]).
//
// With procfs the cgroup took 13 µs against 18 by hand (which allocated 64 KiB per call) and the status
// 20 µs against 11: a task's input is looked at for at most 64 processes, a few times a second.
//
// The package is Linux-only; elsewhere it is empty.
package proc
