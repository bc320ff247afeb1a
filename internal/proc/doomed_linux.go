package proc

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// Doomed reports whether the process st (its pid and start time) can never run its own code again,
// though it may not look dead yet (see Stat.Dead): a SIGKILL is pending for it, which nothing can
// block, catch or ignore (kill(2) and cgroup.kill queue it for the whole process, the kernel for
// each thread when another one calls exit_group); or its main thread is exiting and every other
// thread is too, or has a SIGKILL pending. A process killed so keeps showing "alive" to a look at its
// main thread's stat for as long as its last thread takes to exit (a large one, or one held in its
// exit: a thread stopped there by a tracer, a core dump, a read in uninterruptible sleep).
func (w *Walker) Doomed(st Stat) bool {
	if w.sigkillPending(st.Pid, "") {
		return true
	}
	if st.State != 'Z' && !st.Exiting() {
		return false
	}
	self := strconv.Itoa(st.Pid)
	tids, err := w.names(unix.AT_FDCWD, "/proc/"+self+"/task")
	if err != nil {
		return false
	}
	for _, tid := range tids {
		if tid == self {
			continue
		}
		b, ok := w.read(st.Pid, "/task/"+tid+"/stat", 0)
		if !ok {
			continue // gone meanwhile
		}
		t, ok := ParseStat(st.Pid, b)
		if ok && (t.State == 'Z' || t.State == 'X' || t.Exiting()) {
			continue
		}
		if !w.sigkillPending(st.Pid, tid) {
			return false
		}
	}
	return true
}

// sigkillPending reports whether SIGKILL is pending for the process pid (its shared pending signals)
// or, with tid, for that thread of it (its own), from /proc/<pid>[/task/<tid>]/status.
func (w *Walker) sigkillPending(pid int, tid string) bool {
	file := "/status"
	if tid != "" {
		file = "/task/" + tid + "/status"
	}
	b, ok := w.read(pid, file, 0)
	if !ok {
		return false
	}
	for _, key := range []string{"SigPnd", "ShdPnd"} {
		v, _ := lineValue(b, key)
		if mask, err := strconv.ParseUint(string(v), 16, 64); err == nil && mask&(1<<(9-1)) != 0 { // SIGKILL is 9: bit 8
			return true
		}
	}
	return false
}
