package main

import "golang.org/x/sys/unix"

// The defaults of the counts that are sized for the machine: what each costs is what there is of it.

// defaultMaxSessions is one session per 64 MiB of the machine's memory, between 8 and 1024: a session
// holds its init, its tasks' output files (on a tmpfs state directory, memory) and its tasks.
func defaultMaxSessions() int {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 64
	}
	n := int(uint64(si.Totalram) * uint64(si.Unit) / (64 << 20))
	return min(max(n, 8), 1024)
}

// defaultMaxConns is a quarter of the descriptors the process may open (Go raises the soft limit to
// the hard one at start), at most 4096: the rest stay for sessions' teardowns, tasks' pipes and
// terminals, cgroup files and /proc.
func defaultMaxConns() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1024
	}
	return int(min(max(rl.Cur/4, 16), 4096))
}
